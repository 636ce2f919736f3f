"""`harness run --base REF --head REF --build-bundle CMD`: the two bundles of a base/head run,
built here from two revisions of the compiler's repository.

For each revision a detached worktree of the repository is checked out at REF in a temporary
folder, and CMD runs there in bash: `{src}` the worktree, `{out}` the bundle folder to write,
`{ref}` and `{label}` (base or head). A placeholder becomes a quoted reference to an environment
variable ("$KERNELGAP_SRC", ...), never the value's text, so no value is ever parsed by the
shell; write placeholders bare, not inside quotes. A REF must be a git ref name
(`git check-ref-format`) or an object id, optionally followed by ~N or ^N, and may not start
with "-". CMD builds the
compiler at that revision and writes a PTX bundle of the suite with it, e.g.

    --build-bundle 'make -C {src} && PATH={src}/build/bin:$PATH python -m runner build
                    benchmarks/cases.toml --out {out}'

(a command run from the directory `harness run` was started in would name the suite relative to
it; CMD runs in {src}, so give the suite as an absolute path or one inside the compiler's tree).
A revision whose command fails, or leaves no {out}/bundle.json, stops the run before anything is
shipped or rented. The worktrees are removed afterwards; the bundles live as long as the run.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
from pathlib import Path

from harness.errors import RevisionBuildError

__all__ = [
    "PLACEHOLDERS",
    "build_revisions",
    "check_ref",
    "environment",
    "fill",
    "revision_bundles",
    "variable",
]

PLACEHOLDERS = ("src", "out", "ref", "label")
GIT_TIMEOUT_S = 120.0
BUILD_TIMEOUT_S = 3600.0


_SUFFIXES = re.compile(r"(?:[~^][0-9]*)*$")  # HEAD~1, main^2: ancestry, not part of the name
_OBJECT_ID = re.compile(r"[0-9a-fA-F]{4,64}")


def variable(name: str) -> str:
    """The environment variable that carries placeholder {name} into the build command."""
    return f"KERNELGAP_{name.upper()}"


def fill(command: str) -> str:
    """`command` with each {name} of PLACEHOLDERS replaced by "$KERNELGAP_NAME": the values
    travel in the environment (environment()), so none is ever parsed as shell text."""
    for name in PLACEHOLDERS:
        command = command.replace("{" + name + "}", f'"${variable(name)}"')
    return command


def environment(**values) -> dict[str, str]:
    """This process's environment plus one KERNELGAP_NAME per placeholder."""
    return {**os.environ, **{variable(name): str(values[name]) for name in PLACEHOLDERS}}


def check_ref(label: str, ref: str) -> None:
    """RevisionBuildError unless `ref` is a git ref name or an object id, with optional ~N/^N
    suffixes: a REF is data, and one starting with "-" would be read by git as an option."""
    name = _SUFFIXES.sub("", ref)
    if not ref or ref.startswith("-") or not name:
        raise RevisionBuildError(f"--{label} {ref!r}: not a git ref name or commit id")
    if _OBJECT_ID.fullmatch(name):
        return
    valid = subprocess.run(
        ["git", "check-ref-format", "--allow-onelevel", name],
        capture_output=True,
        timeout=GIT_TIMEOUT_S,
    )
    if valid.returncode != 0 or name == "@" or any(ord(c) < 33 for c in name):
        raise RevisionBuildError(
            f"--{label} {ref!r}: not a git ref name or commit id (git check-ref-format refuses "
            f"{name!r}); give a branch, tag or commit, optionally with ~N or ^N"
        )


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S
    )


def _tail(text: str, lines: int = 8) -> str:
    return "\n".join(f"  | {line}" for line in text.rstrip().splitlines()[-lines:])


def build_revisions(
    repo: Path, refs: dict[str, str], command: str, work: Path, say=lambda text: None
) -> tuple[tuple[str, Path], ...]:
    """((label, bundle folder), ...) for each (label, REF) of `refs`, built under `work`."""
    if "{out}" not in command:
        raise RevisionBuildError(
            f"--build-bundle {command!r}: the command must write the bundle to {{out}}"
        )
    top = _git(repo, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise RevisionBuildError(
            f"--compiler-repo {repo}: not a git checkout ({top.stderr.strip()})"
        )
    repo = Path(top.stdout.strip())
    for label, ref in refs.items():
        check_ref(label, ref)
    built = []
    for label, ref in refs.items():
        src, out = work / f"src-{label}", work / f"bundle-{label}"
        added = _git(repo, "worktree", "add", "--detach", str(src), ref)
        if added.returncode != 0:
            raise RevisionBuildError(
                f"--{label} {ref}: cannot check out {ref!r} of {repo}: {added.stderr.strip()}"
            )
        try:
            say(f"harness: building the {label} bundle at {ref} in {src}")
            done = subprocess.run(
                [
                    "bash",
                    "-euo",
                    "pipefail",
                    "-c",
                    fill(command),
                ],
                cwd=src,
                env=environment(src=src, out=out, ref=ref, label=label),
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
            )
            if done.returncode != 0:
                raise RevisionBuildError(
                    f"--build-bundle for --{label} {ref} exited {done.returncode}:\n"
                    f"{_tail(done.stderr or done.stdout)}"
                )
            if not (out / "bundle.json").is_file():
                raise RevisionBuildError(
                    f"--build-bundle for --{label} {ref} left no bundle at {out} (bundle.json "
                    "missing): write it with `python -m runner build CASES.toml --out {out}`"
                )
            built.append((label, out))
        finally:
            _git(repo, "worktree", "remove", "--force", str(src))
    return tuple(built)


@contextlib.contextmanager
def revision_bundles(refs: dict, command: str | None, repo: Path, other_bundles: bool, say):
    """The bundles --base REF --head REF --build-bundle CMD asks for, built in a temporary
    folder that lasts while the `with` does; None when no REF was given. RevisionBuildError for
    a half-given form, one mixed with other bundle options, or a failed build."""
    if not any(refs.values()):
        if command:
            raise RevisionBuildError("--build-bundle needs --base REF and --head REF")
        yield None
        return
    if not all(refs.values()) or not command or other_bundles:
        raise RevisionBuildError(
            "--base REF and --head REF go together, need --build-bundle CMD, and replace "
            "--bundle and --base-bundle/--head-bundle"
        )
    with tempfile.TemporaryDirectory(prefix="kernelgap-revisions-") as work:
        yield build_revisions(repo, refs, command, Path(work), say)
