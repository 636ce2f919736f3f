"""The CUDA driver started early, through libcuda itself, for a process that lives for one launch.

cuInit and the device's primary context take most of a `runner launch --no-service` process's
life, all of it inside the driver with the GIL released. `start()` spends that time in a thread
begun before the process imports cuda.bindings and its own launch modules, parses its arguments
and reads the PTX: it loads libcuda with ctypes (no cuda.bindings), calls cuInit(0) and retains
the device's primary context. runner.gpu.driver waits for it before its first driver call, so
the usual path finds the driver initialised and the context made, then reports exactly what it
would have reported alone: any failure here (no libcuda, no device) is left for it to meet.

The reference retained here is kept until the process ends, which frees the context with the
rest of the process (the path's own Context.close() then drops only its own reference). Standard
library only; `KERNELGAP_EARLY_DRIVER=0` turns it off.
"""

from __future__ import annotations

import ctypes
import os
import threading

__all__ = ["SWITCH", "start", "wait"]

SWITCH = "KERNELGAP_EARLY_DRIVER"  # "0": no early start (the driver comes up when first used)

_thread: threading.Thread | None = None


def start(ordinal: int = 0) -> threading.Thread | None:
    """Begin bringing up the driver and device `ordinal`'s primary context in a daemon thread;
    at most once a process. None where the switch turns it off."""
    global _thread
    if _thread is None and os.environ.get(SWITCH) != "0":
        _thread = threading.Thread(target=_bring_up, args=(ordinal,), daemon=True)
        _thread.start()
    return _thread


def wait() -> None:
    """Return once the early start (if one was begun) has finished, whatever its outcome."""
    if _thread is not None and _thread is not threading.current_thread():
        _thread.join()


def _bring_up(ordinal: int) -> None:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        if cuda.cuInit(0) != 0:
            return
        device = ctypes.c_int()
        if cuda.cuDeviceGet(ctypes.byref(device), ordinal) != 0:
            return
        context = ctypes.c_void_p()
        cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device)
    except Exception:  # no driver library, a missing symbol: the usual path meets and says it
        return
