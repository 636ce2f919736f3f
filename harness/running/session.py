"""The steps of one `harness run` on an opened transport, and what is kept of their output.

A `Session` ships the tree (harness.running.shipping) with every step it runs on the target: installing
the runner's requirements, the GPU tests, `runner check` or `runner bench`, with the remote's
stderr streaming through (harness.running.transport.base). The runner's document is validated
and saved under --out with a name that sorts by time (`result_name`); when a step fails or is
cut short, what had arrived is kept (`_save_partial`): the runner's last partial document,
else its raw stdout. A step that cannot give a document raises RunFailed (exit 2).

`SOURCE` (`--install`): kernelgap's own virtual environment on a target, where `harness run --install` puts the
runner's requirements, instead of the target's global Python.

`SOURCE` runs there as `python -c SOURCE [FOLDER]` (standard library only): it makes the
environment once (with the system's site-packages visible, so a GPU image's torch or
cuda-bindings are reused rather than downloaded again), reuses it on later runs, and prints one
JSON line saying where it is. The default folder is `$XDG_CACHE_HOME/kernelgap/venv-pyX.Y`
(`~/.cache/...`), one per Python version."""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import click

from harness.errors import RunFailed, ShippingError, TransportError
from harness.history.store_schema import normalize_utc
from harness.running import shipping
from harness.running.result_files import keep
from harness.running.transport.base import Completed, StderrTail, Transport
from protocol.validation import load_result

__all__ = ["INSTALL_TIMEOUT_S", "Session", "result_name"]


READY = "kernelgap-venv "  # the line's prefix, so whatever a login shell prints before is skipped


def venv_main() -> None:
    import json
    import os
    import sys
    import venv
    from pathlib import Path

    given = sys.argv[1] if len(sys.argv) > 1 else ""
    if given:
        folder = Path(given).expanduser()
    else:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        folder = cache / "kernelgap" / f"venv-py{sys.version_info[0]}.{sys.version_info[1]}"
    python = folder / "bin" / "python"
    reused = python.exists()
    if not reused:
        try:
            venv.create(folder, system_site_packages=True, with_pip=True)
        except Exception as exc:  # no ensurepip (Debian without python3-venv): pip from outside
            print(
                f"kernelgap: ensurepip failed ({exc}); the system's pip installs into it",
                file=sys.stderr,
            )
            venv.create(folder, system_site_packages=True, with_pip=False, clear=True)
    has_pip = (folder / "bin" / "pip").exists() or any(folder.glob("lib/python*/site-packages/pip"))
    line = {"folder": str(folder), "python": str(python), "reused": reused, "pip": has_pip}
    print("kernelgap-venv " + json.dumps(line), flush=True)


SOURCE = inspect.getsource(venv_main) + "\nvenv_main()\n"


@dataclass(frozen=True)
class Venv:
    folder: str
    python: str
    reused: bool
    has_pip: bool

    @classmethod
    def parse(cls, stdout: bytes) -> Venv:
        """The environment `SOURCE` reported; ValueError when no line of it is there."""
        for line in reversed(stdout.decode("utf-8", "replace").splitlines()):
            if line.startswith(READY):
                found = json.loads(line[len(READY) :])
                return cls(
                    found["folder"], found["python"], bool(found["reused"]), bool(found["pip"])
                )
        raise ValueError("no kernelgap-venv line in the output")

    def pip(self, system_python: str) -> list[str]:
        """The pip command that installs into this environment."""
        if self.has_pip:
            return [self.python, "-m", "pip"]
        return [system_python, "-m", "pip", "--python", self.python]  # pip 22.3 and later


INSTALL_TIMEOUT_S = 1800.0


# what a Python without the runner's packages says (ImportError, runner.cuda_bindings.missing)
MISSING_PACKAGE = re.compile(r"No module named|is not installed")


# runs argv with its stdout on stderr, so pytest's report streams live (stdout is for documents)
STDOUT_TO_STDERR = "import os, sys; os.dup2(2, 1); os.execvp(sys.argv[1], sys.argv[1:])"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", str(text).lower()).strip("-") or "unknown"


def result_name(document: dict) -> str:
    """`<UTC start>-<gpu>-<short commit>.json`: 20261129T120104Z-nvidia-h200-00de148a1b2c.json."""
    try:  # the schema allows the fraction to be absent or of any length
        started = datetime.strptime(normalize_utc(document["started_utc"]), "%Y-%m-%dT%H:%M:%S.%fZ")
    except (KeyError, TypeError, AttributeError, ValueError):
        started = datetime.now(UTC)
    gpu = ((document.get("environment") or {}).get("device") or {}).get("name") or "gpu"
    commit = (document.get("suite") or {}).get("commit") or "nocommit"
    short = commit.split("-", 1)[0][:12] + ("-dirty" if commit.endswith("-dirty") else "")
    return f"{started:%Y%m%dT%H%M%SZ}-{_slug(gpu)}-{_slug(short)}.json"


def _save_partial(out: Path, target: str, data: bytes, partial: bytes | None = None) -> str:
    """Keep what was measured: the runner's last partial document, else whatever stdout held
    (elsewhere when `out` cannot take it: harness.running.result_files)."""
    stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{_slug(target)}"
    if partial:
        kept = keep(out, f"{stamp}.partial.json", partial, "the partial document")
        where = kept.problem or f"kept in {kept.path}"
        return f"the cases finished before that: {where} (a document with complete: false)"
    if not data:
        return "nothing had arrived on the runner's stdout"
    kept = keep(out, f"{stamp}.partial", data, "what had arrived on the runner's stdout")
    return kept.problem or f"what had arrived on its stdout is kept in {kept.path}"


class Session:
    """The steps of one `harness run` on one opened transport."""

    def __init__(self, transport: Transport, plan: shipping.Shipment, options: dict):
        self.transport = transport
        self.plan = plan
        self.options = options
        self.tail = StderrTail()

    def step(
        self, what: str, command: list[str], *, ship: bool = True, timeout_s=None
    ) -> Completed:
        python = self.options["python"]
        click.echo(f"harness: {what} on {self.transport.description}", err=True)
        try:
            return self.transport.run(
                shipping.in_shipped_tree(python, command) if ship else command,
                self.plan.stream() if ship else None,  # tar made as it is sent
                timeout_s=timeout_s or self.options["job_timeout_s"],
                stderr_sink=self.tail,
            )
        except TransportError as exc:
            kept = _save_partial(
                self.options["out"], self.options["target"], exc.stdout, self.tail.partial
            )
            raise RunFailed(f"{what}: {exc}; {kept}") from None

    def install(self) -> None:
        """Install the runner's requirements into kernelgap's own virtual environment on the
        target (made once, reused by later runs), never into the target's global Python; the
        steps after this one run with that environment's interpreter."""
        python = self.options["python"]
        try:
            requirements = shipping.runner_requirements(self.options["pytest_gpu"])
        except ShippingError as exc:
            raise RunFailed(str(exc)) from None
        made = self.step(
            "preparing kernelgap's virtual environment",
            [python, "-c", SOURCE, self.options.get("venv") or ""],
            ship=False,
            timeout_s=INSTALL_TIMEOUT_S,
        )
        try:
            venv = Venv.parse(made.stdout) if made.returncode == 0 else None
        except ValueError:
            venv = None
        if venv is None:
            raise RunFailed(
                f"could not make a virtual environment with {python} on "
                f"{self.transport.description} (exit {made.returncode}):\n{self.tail.lines()}"
            )
        how = "reused" if venv.reused else "made"
        click.echo(f"harness: kernelgap's environment there: {venv.folder} ({how})", err=True)
        done = self.step(
            "installing the runner's dependencies",
            [*venv.pip(python), "install", "--quiet", "--disable-pip-version-check", *requirements],
            ship=False,
            timeout_s=INSTALL_TIMEOUT_S,
        )
        if done.returncode != 0:
            raise RunFailed(
                f"pip install into {venv.folder} exited {done.returncode} on the target:\n"
                f"{self.tail.lines()}"
            )
        self.options["python"] = venv.python

    def pytest_gpu(self) -> bool:
        """`pytest -m gpu` in the shipped tree; True when it passed."""
        python = self.options["python"]
        argv = [python, "-c", STDOUT_TO_STDERR, python, "-m", "pytest", "-m", "gpu"]
        done = self.step("GPU tests (pytest -m gpu)", [*argv, "-p", "no:cacheprovider"])
        if done.returncode != 0:
            click.echo(
                f"harness: GPU tests failed (pytest exit status {done.returncode})", err=True
            )
        return done.returncode == 0

    def check(self) -> int:
        python = self.options["python"]
        command = [python, "-m", "runner", "check", self.plan.cases, *self.options["runner_args"]]
        done = self.step("runner check", command)  # its report streams to stderr
        if done.returncode not in (0, 1):
            raise RunFailed(
                f"runner check exited {done.returncode} on {self.transport.description}:\n"
                f"{self.tail.lines()}"
            )
        return done.returncode

    def bench(self) -> int:
        python = self.options["python"]
        command = [python, "-m", "runner", "bench", self.plan.cases, "--emit-partial"]
        if self.options["commit"]:
            command += ["--commit", self.options["commit"]]
        if self.plan.bundle:
            command += ["--bundle", self.plan.bundle]
        for label, folder in self.plan.revisions:  # runner.definition.bundle: X@base and X@head
            command += ["--bundle", f"{label}={folder}"]
        done = self.step("runner bench", [*command, *self.options["runner_args"]])
        return self.keep(done)

    def _install_hint(self) -> str:
        """A word on --install when the target's Python lacks one of the runner's packages."""
        if self.options.get("install") or not MISSING_PACKAGE.search(self.tail.lines()):
            return ""
        return (
            "\nThe target's Python lacks the runner's dependencies: run again with --install "
            "(they go into a virtual environment of kernelgap's own there, reused by later runs)"
        )

    def keep(self, done: Completed) -> int:
        """Validate and save the runner's document; the exit status for it."""
        where = self.transport.description
        if done.returncode not in (0, 1):
            kept = _save_partial(
                self.options["out"], self.options["target"], done.stdout, self.tail.partial
            )
            meaning = " (bad input or no GPU)" if done.returncode == 2 else ""
            raise RunFailed(
                f"the runner on {where} exited {done.returncode}{meaning}; {kept}; "
                f"its last lines on stderr:\n{self.tail.lines()}{self._install_hint()}"
            )
        try:
            document = load_result(done.stdout, f"result document from {where}")
        except ValueError as exc:
            kept = _save_partial(
                self.options["out"], self.options["target"], done.stdout, self.tail.partial
            )
            raise RunFailed(f"{exc}; {kept}{self._install_hint()}") from None
        kept = keep(self.options["out"], result_name(document), done.stdout)
        if kept.path is not None:
            click.echo(str(kept.path))  # where the document is, even when not under --out
        if kept.problem:
            failed = "; some case failed" if done.returncode == 1 else ""
            raise RunFailed(f"{kept.problem}{failed}")
        if done.returncode == 1:
            click.echo("harness: some case failed; the document records which and why", err=True)
        return done.returncode
