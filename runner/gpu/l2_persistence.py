"""The persisting-L2 limit of the current context: set to 0 once at setup and read back.

An access-policy window can mark a kernel's data "persisting", which keeps it in the L2's
set-aside part across launches, through a cold sample's flush. Resetting persisting lines
before each launch (cuCtxResetPersistingL2Cache) is a host call, not a stream operation: it
runs when the host reaches it, not in order with the launches queued before it, so it cannot
sit between a queued launch and the next one's flush. With the limit at 0 there is no
set-aside part, so no line persists across launches at all; the read-back is recorded
(environment.persisting_l2) and the timing refuses a context whose read-back is not 0.
"""

from __future__ import annotations

from runner.gpu import driver

__all__ = ["LIMIT", "limit_bytes", "set_none"]

LIMIT = "CU_LIMIT_PERSISTING_L2_CACHE_SIZE"
HOW = (
    "cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0) once at context setup, read back with "
    "cuCtxGetLimit: no L2 line persists across launches, so no per-launch host-side reset "
    "(cuCtxResetPersistingL2Cache, outside stream order) is made"
)


def _max_bytes(ctx: driver.Context) -> int | None:
    """The device's largest persisting set-aside (0: it has none, before sm_80), or None."""
    try:
        return ctx.attribute("MAX_PERSISTING_L2_CACHE_SIZE")
    except (AttributeError, driver.CudaError):
        return None


def set_none(ctx: driver.Context) -> dict:
    """Set the current context's persisting-L2 limit to 0 and read it back.

    {"limit_bytes": read back, "max_bytes": the device's maximum, "how": ...}, with "error"
    where the driver refused the call (MPS fixes the limit at the server's start); a device
    without a persisting L2 (max 0) records limit 0 and is not asked. A sticky error raises."""
    d = driver.cu()
    max_bytes = _max_bytes(ctx)
    record: dict = {"limit_bytes": 0, "max_bytes": max_bytes, "how": HOW}
    if max_bytes == 0:
        record["how"] = "the device has no persisting L2 (its maximum set-aside is 0)"
        return record
    try:
        driver.check(d.cuCtxSetLimit(getattr(d.CUlimit, LIMIT), 0), f"cuCtxSetLimit({LIMIT}, 0)")
    except driver.CudaError as exc:
        if exc.sticky:
            raise
        record["error"] = str(exc)
    record["limit_bytes"] = limit_bytes()
    return record


def limit_bytes() -> int:
    """The current context's persisting-L2 limit in bytes (cuCtxGetLimit)."""
    d = driver.cu()
    return int(driver.check(d.cuCtxGetLimit(getattr(d.CUlimit, LIMIT)), f"cuCtxGetLimit({LIMIT})"))
