"""command: any external compiler, given as a command template such as
`mycc --arch {arch} {source} -o {output}` or `warpforthc {source}`.

The template is split into words the way a POSIX shell would (shlex) before the placeholders are
filled in, so a source path with spaces stays one argument; the command then runs without a
shell, in the current folder, with a time limit. Placeholders, each optional: {arch} ("sm_90";
a compiler with a fixed target, such as warpforthc, leaves it out), {source} (the source file),
{output} (the PTX file the compiler must write; without it the PTX is read from the compiler's
stdout); `{{` and `}}` are literal braces; any other name is a variable the implementation declares
(`vars = { opt = "-O2" }`), so an option axis can vary it. The implementation's `flags` are appended after the
template's words. When the program (the first word) is not installed, the implementation is
skipped with that reason, never silently. The compiler's identity is what `--version` prints
and the sha256 of the program's file (toolchains.build records both), since many compilers'
`--version` names only their LLVM.
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
    from runner.errors import BuildError

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
    """One word with its placeholders ({arch}, {source}, {output} and the implementation's
    declared variables, the keys of `values`) filled in; BuildError naming an unknown one."""
    from runner.errors import BuildError

    try:
        fields = [
            (n, spec, conv) for _, n, spec, conv in string.Formatter().parse(word) if n is not None
        ]
    except ValueError as exc:  # a lone `{` or `}`
        raise BuildError(
            f"command template {template!r}: {exc} (write {{{{ or }}}} for a literal brace)"
        ) from None
    expected = ", ".join("{" + p + "}" for p in values)
    for name, spec, conversion in fields:
        if name not in values:
            raise BuildError(
                f"command template {template!r}: unknown placeholder {{{name}}}; expected {expected}"
            )
        if spec or conversion:  # `{arch:>99999999}` would be a format spec: only bare names
            raise BuildError(
                f"command template {template!r}: placeholder {{{name}}} has a format spec or "
                f"conversion; write it bare ({expected})"
            )
    return word.format_map(values)


def check(template: str | None, variables: dict[str, str] | None = None) -> None:
    """BuildError naming the problem when the template cannot be filled in (empty, unbalanced
    quotes, an unknown placeholder, a format spec): what a manifest is refused for at load."""
    values = dict.fromkeys([*PLACEHOLDERS, *(variables or {})], "")
    for word in words(template):
        substitute(word, values, template)


def placeholders(template_words: list[str]) -> set[str]:
    """The placeholder names the template's words use (literal `{{` `}}` excluded)."""
    return {
        name
        for word in template_words
        for _, name, _, _ in string.Formatter().parse(word)
        if name is not None
    }


# Where the candidate compilers kernelgap's own suite names come from, for the message a first
# `runner check` prints when one is missing (any other compiler is named as it is).
WHERE_FROM = {
    "warpforthc": (
        " (WarpForth's compiler, Forth -> MLIR -> PTX: build it from WarpForth's source with"
        " CMake against LLVM/MLIR, `cmake -B build -G Ninja -DMLIR_DIR=<llvm>/lib/cmake/mlir"
        " -DLLVM_DIR=<llvm>/lib/cmake/llvm && cmake --build build`, then put build/bin on PATH"
        " or write its path in the case's `command`)"
    ),
}


def program(template: str | None) -> str:
    """Full path of the template's program; ToolchainMissing when it is not installed."""
    from runner.errors import ToolchainMissing

    program = words(template)[0]
    path = shutil.which(program)
    if path is None:
        where = "does not exist or is not executable" if "/" in program else "is not on PATH"
        hint = WHERE_FROM.get(Path(program).name, "")
        raise ToolchainMissing(f"{program} {where}{hint}; implementation skipped")
    return path


@functools.cache
def version(template: str | None = None) -> str:
    """What `<program> --version` prints (its non-blank lines joined by "; ", at most 300
    characters) when it answers with status 0 within 10 s, else "unknown"."""
    try:
        done = subprocess.run(
            [program(template), "--version"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired, RuntimeError):
        return "unknown"
    lines = [line.strip() for line in (done.stdout or done.stderr).splitlines() if line.strip()]
    return "; ".join(lines)[:300] if done.returncode == 0 and lines else "unknown"


def build(
    source: Path,
    arch: str,
    flags: list[str],
    template: str | None = None,
    variables: dict[str, str] | None = None,
) -> tuple[str, list[str]]:
    """`variables`: values of the variables the template declares beside the placeholders."""
    from runner.errors import BuildError

    template_words = words(template)
    path = program(template)
    with tempfile.TemporaryDirectory(prefix="kernelgap-command-") as tmp:
        out = Path(tmp) / (source.stem + ".ptx")
        values = {**(variables or {}), "arch": arch, "source": str(source), "output": str(out)}
        words_out = [substitute(word, values, template) for word in template_words]
        to_stdout = "output" not in placeholders(template_words)
        command = [path, *words_out[1:], *flags]
        try:
            done = subprocess.run(
                command, capture_output=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired:
            raise BuildError(
                f"{source}: {template_words[0]} did not finish within {TIMEOUT_S:g} s"
            ) from None
        except OSError as exc:  # found but not runnable (bad interpreter line, no permission)
            raise BuildError(f"{source}: could not run {template_words[0]}: {exc}") from None
        said = (done.stderr or done.stdout).decode(errors="replace").strip()
        if done.returncode != 0:
            raise BuildError(
                f"{source}: {template_words[0]} exited with {done.returncode}:\n{said}"
            )
        if to_stdout:
            data, where = done.stdout, "stdout"
        elif out.is_file():
            data, where = out.read_bytes(), "{output}"
        else:
            raise BuildError(
                f"{source}: {template_words[0]} exited with 0 but wrote no PTX to {{output}} ({out})"
            )
    data = data.rstrip(b"\0")
    if not data.strip():
        raise BuildError(
            f"{source}: {template_words[0]} exited with 0 but its {where} is empty (expected PTX; "
            "a template without {output} means the PTX is read from stdout)"
        )
    try:
        return data.decode("utf-8"), command
    except UnicodeDecodeError as exc:
        raise BuildError(
            f"{source}: {template_words[0]} wrote {where} that is not UTF-8 PTX text ({exc})"
        ) from None
