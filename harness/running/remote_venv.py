"""kernelgap's own virtual environment on a target: where `harness run --install` puts the
runner's requirements, instead of the target's global Python.

`SOURCE` runs there as `python -c SOURCE [FOLDER]` (standard library only): it makes the
environment once (with the system's site-packages visible, so a GPU image's torch or
cuda-bindings are reused rather than downloaded again), reuses it on later runs, and prints one
JSON line saying where it is. The default folder is `$XDG_CACHE_HOME/kernelgap/venv-pyX.Y`
(`~/.cache/...`), one per Python version.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass

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
