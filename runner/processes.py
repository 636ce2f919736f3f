"""What every worker process of the runner shares: where the code is and its answer pipe.

Kept free of heavy imports (no jsonschema, numpy or CUDA), so a supervisor can start a worker
before it loads anything else (runner serve's start-up).
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# The answer (event) pipe's file descriptor in the worker's environment: a kernel's printf lands
# on the worker's stdout, which is only log output, so it can never corrupt an answer.
EVENT_FD_VARIABLE = "KERNELGAP_EVENT_FD"
