"""The runner's own launches (generator, L2 flush, blocking spin), told apart from the measured
work by the function launched, never by a kernel's name: a user can name a kernel anything,
kg_* included, and a kernel left out of CUPTI's records by its name is work nobody times.

CUPTI's kernel records carry no function handle, but each carries the correlation id of the API
call that launched it. While an activity window is open (runner.measurement.timing.cupti), the
runner subscribes to CUPTI's driver-API callbacks; around each of its own launches
(`launching()`) it turns on the callback for cuLaunchKernel, which notes the correlation id of a
launch whose CUfunction is one of the runner's own module (`register`). A record with such a
correlation id is the runner's; every other record counts, whatever its name. The callback is
on only during the runner's own launches, so measured launches pay nothing for it; a launch
another thread makes meanwhile is told apart by its function.
"""

from __future__ import annotations

import contextlib
import threading
from typing import ClassVar

from runner.errors import OwnLaunchError

__all__ = [
    "OwnLaunchError",
    "forget",
    "is_own",
    "launching",
    "register",
    "subscribe",
    "unsubscribe",
]

LAUNCH_APIS = ("cuLaunchKernel", "cuLaunchKernel_ptsz")


class _State:
    functions: ClassVar[set[int]] = (
        set()
    )  # CUfunction handles (as ints) of the runner's own kernels
    correlation_ids: ClassVar[set[int]] = (
        set()
    )  # of own launches whose records have not arrived yet
    noted = 0  # own launches the callback has seen, ever
    subscriber = None
    users = 0
    cupti = None
    cbids: tuple = ()
    errors: ClassVar[list[str]] = []
    lock = threading.Lock()


def register(functions) -> None:
    """The runner's own kernels (CUfunction handles, or anything int() turns into one)."""
    _State.functions.update(int(f) for f in functions)


def forget(functions) -> None:
    _State.functions.difference_update(int(f) for f in functions)


def is_own(correlation_id) -> bool:
    """Whether a record with this correlation id came from one of the runner's own launches
    (each id answers True once: a record is delivered once)."""
    if correlation_id is None:
        return False
    cid = int(correlation_id)
    with _State.lock:
        if cid in _State.correlation_ids:
            _State.correlation_ids.discard(cid)
            return True
    return False


def _callback(userdata, domain, cbid, data) -> None:
    cupti = _State.cupti
    try:
        if not hasattr(data, "function_params"):  # a raw pointer in some cupti-python releases
            data = cupti.CallbackData.from_ptr(int(data))
        if int(data.callback_site) != int(cupti.ApiCallbackSite.API_ENTER):
            return
        # cuLaunchKernel and its _ptsz twin share one parameter layout
        params = cupti.CuLaunchKernelParams.from_ptr(int(data.function_params), owner=data)
        if int(params.f) in _State.functions:
            with _State.lock:
                _State.correlation_ids.add(int(data.correlation_id))
                _State.noted += 1
    except BaseException as exc:  # never raise into the driver: report at the launch instead
        _State.errors.append(f"{type(exc).__name__}: {exc}")


def missing_api(cupti) -> list[str]:
    """What of the callback API used here this cupti-python lacks (empty when nothing)."""
    needed = ["subscribe", "unsubscribe", "enable_callback", "CallbackDomain", "ApiCallbackSite"]
    needed += ["DriverApiTraceCbid", "CuLaunchKernelParams"]
    missing = [name for name in needed if not hasattr(cupti, name)]
    cbids = getattr(cupti, "DriverApiTraceCbid", None)
    if cbids is not None:
        missing += [f"DriverApiTraceCbid.{api}" for api in LAUNCH_APIS if not hasattr(cbids, api)]
    return missing


def subscribe() -> None:
    """Subscribe to CUPTI's callbacks (once per process, counted: unsubscribe() as often)."""
    if _State.users == 0:
        from cupti import cupti

        _State.cupti = cupti
        _State.cbids = tuple(int(getattr(cupti.DriverApiTraceCbid, api)) for api in LAUNCH_APIS)
        _State.subscriber = cupti.subscribe(_callback, None)
    _State.users += 1


def unsubscribe() -> None:
    if _State.users == 0:
        return
    _State.users -= 1
    if _State.users == 0 and _State.subscriber is not None:
        _State.cupti.unsubscribe(_State.subscriber)
        _State.subscriber = None
        with _State.lock:
            _State.correlation_ids.clear()


def _enable(on: int) -> None:
    cupti = _State.cupti
    for cbid in _State.cbids:
        cupti.enable_callback(on, _State.subscriber, cupti.CallbackDomain.DRIVER_API, cbid)


@contextlib.contextmanager
def launching():
    """Around one of the runner's own launches: its correlation id is noted (no-op while no
    window is open). OwnLaunchError when CUPTI did not report it, so its record would count."""
    if _State.subscriber is None:
        yield
        return
    before = _State.noted
    _enable(1)
    try:
        yield
    finally:
        _enable(0)
    if _State.noted == before:
        said = f" (the callback said: {_State.errors[-1]})" if _State.errors else ""
        raise OwnLaunchError(
            "CUPTI's driver-API callback did not report the runner's own kernel launch, so its "
            "activity record cannot be told apart from the measured kernels'" + said + "; time "
            "with --timer events"
        )
