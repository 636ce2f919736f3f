"""What every worker process of the runner shares: where the code is and its answer pipe.

Kept free of heavy imports (no jsonschema, numpy or CUDA), so a supervisor can start a worker
before it loads anything else (runner serve's start-up).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# The folder holding the runner package: a checkout's root, or site-packages for a wheel. A
# worker starts there (and has it on its path) so it imports this very runner, never a `runner/`
# that happens to sit in the user's current folder.
REPO_ROOT = Path(__file__).resolve().parents[2]
# The answer (event) pipe's file descriptor in the worker's environment: a kernel's printf lands
# on the worker's stdout, which is only log output, so it can never corrupt an answer.
EVENT_FD_VARIABLE = "KERNELGAP_EVENT_FD"


def spawn_worker(module: str, stderr=subprocess.PIPE) -> tuple[subprocess.Popen, int]:
    """`python -m module` in its own process group, with stdin and stdout piped and the read end
    of its answer pipe returned beside it (the worker writes to $KERNELGAP_EVENT_FD)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    read_fd, write_fd = os.pipe()
    env[EVENT_FD_VARIABLE] = str(write_fd)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", module],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=REPO_ROOT,
            env=env,
            start_new_session=True,
            pass_fds=(write_fd,),
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    return proc, read_fd
