"""command: any external compiler, given as a command template such as
`warpforthc --arch {arch} {source} -o {output}`.

The template is split into words the way a POSIX shell would (shlex) before the placeholders are
filled in, so a source path with spaces stays one argument; the command then runs without a
shell, in the current folder, with a time limit. Placeholders: {arch} ("sm_90"), {source} (the
source file), {output} (the PTX file the compiler must write); `{{` and `}}` are literal braces.
The implementation's `flags` are appended after the template's words. When the program (the
first word) is not installed, the implementation is skipped with that reason, never silently.
"""

from __future__ import annotations

import functools
import shlex
import shutil
import string
import subprocess
import tempfile
from pathlib import Path

PLACEHOLDERS = ("arch", "source", "output")
TIMEOUT_S = 300.0
VERSION_TIMEOUT_S = 10.0


def words(template: str | None) -> list[str]:
    """The template's words, unsubstituted; BuildError when it is empty or unbalanced."""
    from runner.toolchains import BuildError

    if not template or not template.strip():
        raise BuildError(
            "toolchain 'command' needs the implementation's `command` template, e.g. "
            "`mycc --arch {arch} {source} -o {output}`"
        )
    try:
        return shlex.split(template)
    except ValueError as exc:
        raise BuildError(f"command template {template!r}: {exc}") from None


def substitute(word: str, values: dict[str, str], template: str) -> str:
    """One word with its placeholders filled in; BuildError naming an unknown placeholder."""
    from runner.toolchains import BuildError

    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(word) if name is not None]
    except ValueError as exc:  # a lone `{` or `}`
        raise BuildError(
            f"command template {template!r}: {exc} (write {{{{ or }}}} for a literal brace)"
        ) from None
    for name in fields:
        if name not in PLACEHOLDERS:
            raise BuildError(
                f"command template {template!r}: unknown placeholder {{{name}}}; "
                f"expected {', '.join('{' + p + '}' for p in PLACEHOLDERS)}"
            )
    return word.format_map(values)


def _program(template: str | None) -> str:
    """Full path of the template's program; ToolchainMissing when it is not installed."""
    from runner.toolchains import ToolchainMissing

    program = words(template)[0]
    path = shutil.which(program)
    if path is None:
        where = "does not exist or is not executable" if "/" in program else "is not on PATH"
        raise ToolchainMissing(f"{program} {where}; implementation skipped")
    return path


@functools.cache
def version(template: str | None = None) -> str:
    """First line of `<program> --version` when it answers within 10 s, else "unknown"."""
    try:
        done = subprocess.run(
            [_program(template), "--version"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired, RuntimeError):
        return "unknown"
    lines = [line.strip() for line in (done.stdout or done.stderr).splitlines() if line.strip()]
    return lines[0] if done.returncode == 0 and lines else "unknown"


def build(
    source: Path, arch: str, flags: list[str], template: str | None = None
) -> tuple[str, list[str]]:
    from runner.toolchains import BuildError

    template_words = words(template)
    program = _program(template)
    with tempfile.TemporaryDirectory(prefix="kernelgap-command-") as tmp:
        out = Path(tmp) / (source.stem + ".ptx")
        values = {"arch": arch, "source": str(source), "output": str(out)}
        words_out = [substitute(word, values, template) for word in template_words]
        command = [program, *words_out[1:], *flags]
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise BuildError(
                f"{source}: {template_words[0]} did not finish within {TIMEOUT_S:g} s"
            ) from None
        except OSError as exc:  # found but not runnable (bad interpreter line, no permission)
            raise BuildError(f"{source}: could not run {template_words[0]}: {exc}") from None
        if done.returncode != 0:
            raise BuildError(
                f"{source}: {template_words[0]} exited with {done.returncode}:\n"
                f"{(done.stderr or done.stdout).strip()}"
            )
        if not out.is_file():
            raise BuildError(
                f"{source}: {template_words[0]} exited with 0 but wrote no PTX to {{output}} ({out})"
            )
        data = out.read_bytes().rstrip(b"\0")
    try:
        return data.decode("utf-8"), command
    except UnicodeDecodeError as exc:
        raise BuildError(
            f"{source}: {template_words[0]} wrote {{output}} that is not UTF-8 PTX text ({exc})"
        ) from None
