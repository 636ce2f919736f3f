"""Bounds of a run request that the runner, the host's client and schemas/run-request.schema.json
share: a number past them is refused as input, never carried into a timer or a deadline."""

from __future__ import annotations

# One day: far past any kernel a test launches, and far inside what a thread's timed wait, a
# timestamp or a deadline sum can hold (threading.TIMEOUT_MAX is about 9.2e9 s on Linux).
MAX_TIMEOUT_S = 86400.0
