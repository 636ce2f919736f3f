"""Thin, checked wrapper over cuda-python's driver API (`cuda.bindings.driver`).

Every driver call goes through `check()`, which turns a failing return code into a
`CudaError` whose text names the call, the error name and the driver's message:
``cuLaunchKernel: CUDA_ERROR_INVALID_VALUE: invalid argument``.

cuda-python is imported lazily (first use of `cu()`), so `--help`, `build` and `check`
work on machines without a GPU or driver; numpy only where a numpy array is asked for, so a
launch whose host data is bytes (`runner launch --no-service`) never imports it.

`set_no_persisting_l2()`: the persisting-L2 limit of the current context, set to 0 once at setup
and read back.

An access-policy window can mark a kernel's data "persisting", which keeps it in the L2's
set-aside part across launches, through a cold sample's flush. Resetting persisting lines
before each launch (cuCtxResetPersistingL2Cache) is a host call, not a stream operation: it
runs when the host reaches it, not in order with the launches queued before it, so it cannot
sit between a queued launch and the next one's flush. With the limit at 0 there is no
set-aside part, so no line persists across launches at all; the read-back is recorded
(environment.persisting_l2) and the timing refuses a context whose read-back is not 0.

`ModuleState`: the state a module keeps across launches, its `.global` variables, saved as loaded
and restored.

A kernel can keep a counter or a cache in a module-scope `.global` variable and so behave
differently from one launch to the next (work on every k-th launch, return a result cached by
the input's content). A snapshot of every such variable, taken right after the load and before
any launch, lets cold mode put them back before each launch (device-to-device copies queued
on the stream, outside any timing), so no launch sees what an earlier one left."""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass

from runner.errors import STICKY_ERRORS, CudaError, NoGpuError
from runner.gpu import driver_start, ptx

__all__ = [
    "STICKY_ERRORS",
    "Buffer",
    "Context",
    "Event",
    "Graph",
    "HostFlag",
    "KernelArgs",
    "Module",
    "ModuleState",
    "Stream",
    "check",
    "cu",
    "persisting_l2_bytes",
    "set_no_persisting_l2",
]

# Each command adds what to do instead (runner bench: harness run; runner run: ssh or the service).
NO_GPU_HINT = "this needs a machine with an NVIDIA GPU and driver"

_cu = None


def cu():
    """The `cuda.bindings.driver` module, imported on first use."""
    global _cu
    if _cu is None:
        try:
            from cuda.bindings import driver
        except ImportError as exc:  # cuda-python < 12.6.2 or not installed
            from runner import cuda_bindings as bindings

            raise NoGpuError(bindings.missing("driver", exc)) from exc
        _cu = driver
    return _cu


def _error_strings(err) -> tuple[str, str]:
    d = cu()
    _, name = d.cuGetErrorName(err)
    _, text = d.cuGetErrorString(err)
    name = name.decode() if isinstance(name, bytes) else str(getattr(err, "name", err))
    text = text.decode() if isinstance(text, bytes) else ""
    return name, text


def check(result, call: str):
    """Gate for every driver return tuple: raise CudaError on failure, else return the values."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        name, text = _error_strings(err)
        raise CudaError(call, name, text)
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def init() -> None:
    """cuInit(0), turning a missing driver or device into NoGpuError with what to do instead.
    A start begun early (runner.gpu.driver_start) is waited for once cuda.bindings is imported
    (which it overlaps too): its failure is met here."""
    d = cu()
    driver_start.wait()
    try:
        result = d.cuInit(0)
    except Exception as exc:  # the driver library itself could not be loaded
        raise NoGpuError(f"no NVIDIA driver found ({exc}); {NO_GPU_HINT}") from exc
    err = result[0]
    if int(err) != 0:
        name, text = _error_strings(err)
        raise NoGpuError(f"cuInit: {name}: {text}; {NO_GPU_HINT}")
    if check(d.cuDeviceGetCount(), "cuDeviceGetCount") == 0:
        raise NoGpuError(f"the NVIDIA driver reports no CUDA device; {NO_GPU_HINT}")


class Context:
    """The device's primary context, made current on this thread. One per process."""

    def __init__(self, ordinal: int = 0):
        init()
        d = cu()
        self.ordinal = ordinal
        self.device = check(d.cuDeviceGet(ordinal), "cuDeviceGet")
        self.handle = check(d.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        check(d.cuCtxSetCurrent(self.handle), "cuCtxSetCurrent")
        self._closed = False

    def attribute(self, name: str) -> int:
        d = cu()
        attr = getattr(d.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
        return int(
            check(d.cuDeviceGetAttribute(attr, self.device), f"cuDeviceGetAttribute({name})")
        )

    def synchronize(self) -> None:
        check(cu().cuCtxSynchronize(), "cuCtxSynchronize")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            cu().cuDevicePrimaryCtxRelease(self.device)

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Buffer:
    """A device allocation of `nbytes` bytes (at least one byte is allocated)."""

    def __init__(self, nbytes: int):
        self.nbytes = int(nbytes)
        self._handle = check(cu().cuMemAlloc(max(self.nbytes, 1)), "cuMemAlloc")
        self.ptr = int(self._handle)

    def upload(self, data) -> None:
        """Copy host data to the start of the buffer: a numpy array (any layout, in C order) or
        anything else with the buffer protocol (bytearray, array.array)."""
        address, nbytes, _alive = _host_span(data)
        if nbytes > self.nbytes:
            raise ValueError(f"upload of {nbytes} bytes into a {self.nbytes}-byte buffer")
        if nbytes:
            check(cu().cuMemcpyHtoD(self.ptr, address, nbytes), "cuMemcpyHtoD")

    def download_bytes(self, nbytes: int | None = None) -> bytearray:
        """The first `nbytes` bytes (default: all) as they lie on the device."""
        out = bytearray(self.nbytes if nbytes is None else nbytes)
        if out:
            host = (ctypes.c_char * len(out)).from_buffer(out)
            check(cu().cuMemcpyDtoH(ctypes.addressof(host), self.ptr, len(out)), "cuMemcpyDtoH")
        return out

    def download(self, dtype, count: int | None = None):
        """The buffer's start as a numpy array of `count` elements (default: all that fit)."""
        import numpy as np

        dtype = np.dtype(dtype)
        count = self.nbytes // dtype.itemsize if count is None else count
        return np.frombuffer(self.download_bytes(count * dtype.itemsize), dtype=dtype)

    def fill_bytes(self, byte: int, stream: Stream | None = None) -> None:
        d = cu()
        if stream is None:
            check(d.cuMemsetD8(self.ptr, byte, self.nbytes), "cuMemsetD8")
        else:
            check(d.cuMemsetD8Async(self.ptr, byte, self.nbytes, stream.handle), "cuMemsetD8Async")

    def fill_words(self, word: int, stream: Stream) -> None:
        """Fill with a 32-bit pattern (nbytes must be a multiple of 4, the address 4-aligned)."""
        if self.nbytes % 4 or self.ptr % 4:
            raise ValueError(
                f"fill_words needs a 4-aligned buffer of whole words ({self.nbytes} bytes at "
                f"0x{self.ptr:x})"
            )
        check(
            cu().cuMemsetD32Async(self.ptr, word, self.nbytes // 4, stream.handle),
            "cuMemsetD32Async",
        )

    def copy_from(self, other: Buffer, stream: Stream) -> None:
        check(
            cu().cuMemcpyDtoDAsync(
                self.ptr, other.ptr, min(self.nbytes, other.nbytes), stream.handle
            ),
            "cuMemcpyDtoDAsync",
        )

    @classmethod
    def at(cls, ptr: int, nbytes: int) -> Buffer:
        """`nbytes` bytes of device memory at `ptr` that this Buffer does not own (free() does nothing)."""
        found = cls.__new__(cls)
        found.nbytes, found.ptr, found._handle = int(nbytes), int(ptr), None
        return found

    def view(self, offset: int, nbytes: int) -> Buffer:
        """Bytes [offset, offset + nbytes) of this allocation, as a Buffer that owns nothing."""
        if offset < 0 or offset + nbytes > self.nbytes:
            raise ValueError(
                f"view [{offset}, {offset + nbytes}) outside a {self.nbytes}-byte buffer"
            )
        view = Buffer.__new__(Buffer)
        view.nbytes, view.ptr, view._handle = int(nbytes), self.ptr + offset, None
        return view

    def free(self) -> None:
        if self._handle is not None:
            cu().cuMemFree(self._handle)
            self._handle = None


def _host_span(data) -> tuple[int, int, object]:
    """(address, bytes, the object that keeps them alive) of host data laid out in C order."""
    if hasattr(data, "__array_interface__"):  # numpy, imported by whoever made the array
        import numpy as np

        data = np.ascontiguousarray(data)
        return data.ctypes.data, data.nbytes, data
    view = memoryview(data).cast("B")
    if view.readonly:  # ctypes maps writable memory only
        view = memoryview(bytearray(view))
    if not view.nbytes:
        return 0, 0, view
    host = (ctypes.c_char * view.nbytes).from_buffer(view)
    return ctypes.addressof(host), view.nbytes, host


class HostFlag:
    """A 32-bit word of pinned host memory mapped into the device (for the blocking kernel)."""

    def __init__(self):
        d = cu()
        flags = d.CU_MEMHOSTALLOC_DEVICEMAP | d.CU_MEMHOSTALLOC_PORTABLE
        self.host_ptr = int(check(d.cuMemHostAlloc(8, flags), "cuMemHostAlloc"))
        self.device_ptr = int(
            check(d.cuMemHostGetDevicePointer(self.host_ptr, 0), "cuMemHostGetDevicePointer")
        )
        self._word = ctypes.c_uint32.from_address(self.host_ptr)
        self._word.value = 0

    def set(self, value: int) -> None:
        self._word.value = value

    def free(self) -> None:
        if self.host_ptr:
            cu().cuMemFreeHost(self.host_ptr)
            self.host_ptr = 0


class Stream:
    """An explicit non-blocking stream (never the legacy default stream)."""

    def __init__(self):
        d = cu()
        self.handle = check(
            d.cuStreamCreate(d.CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate"
        )

    def synchronize(self) -> None:
        check(cu().cuStreamSynchronize(self.handle), "cuStreamSynchronize")

    def destroy(self) -> None:
        cu().cuStreamDestroy(self.handle)


class Event:
    def __init__(self):
        d = cu()
        self.handle = check(d.cuEventCreate(d.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate")

    def record(self, stream: Stream) -> None:
        check(cu().cuEventRecord(self.handle, stream.handle), "cuEventRecord")

    def synchronize(self) -> None:
        check(cu().cuEventSynchronize(self.handle), "cuEventSynchronize")

    def elapsed_s(self, start: Event) -> float:
        """Seconds from `start` to this event (both recorded and complete)."""
        ms = check(cu().cuEventElapsedTime(start.handle, self.handle), "cuEventElapsedTime")
        return float(ms) * 1e-3

    def destroy(self) -> None:
        cu().cuEventDestroy(self.handle)


# Kernel parameter kinds -> ctypes storage. "ptr" is a device address (64-bit).
CTYPES = {
    "i32": ctypes.c_int32,
    "u32": ctypes.c_uint32,
    "i64": ctypes.c_int64,
    "u64": ctypes.c_uint64,
    "f32": ctypes.c_float,
    "f64": ctypes.c_double,
    "ptr": ctypes.c_uint64,
}
PARAM_BYTES = {kind: ctypes.sizeof(ct) for kind, ct in CTYPES.items()}


class KernelArgs:
    """Packed kernel arguments: `address` is the void** array that cuLaunchKernel takes."""

    def __init__(self, args: list[tuple[str, int | float]]):
        self.values = []
        for kind, value in args:
            ctype = CTYPES[kind]
            self.values.append(ctype(value))
        self._array = (ctypes.c_void_p * max(len(self.values), 1))(
            *[ctypes.addressof(v) for v in self.values]
        )
        self.address = ctypes.addressof(self._array) if self.values else 0


@dataclass
class Kernel:
    """A resolved entry point with its launch geometry."""

    function: object
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0

    def launch(self, stream: Stream, args: KernelArgs) -> None:
        check(
            cu().cuLaunchKernel(
                self.function,
                *self.grid,
                *self.block,
                self.shared_bytes,
                stream.handle,
                args.address,
                0,
            ),
            f"cuLaunchKernel({self.name})",
        )


class Module:
    """A module loaded from PTX text. `load_s` is the wall time of the load (driver JIT included)."""

    LOG_BYTES = 1 << 16

    def __init__(self, ptx: str | bytes, label: str = "module"):
        d = cu()
        image = ptx.encode() if isinstance(ptx, str) else bytes(ptx)
        image = image.rstrip(b"\0") + b"\0"  # the driver needs exactly one terminating NUL
        self.label = label
        error_log = bytearray(self.LOG_BYTES)
        options = [
            d.CUjit_option.CU_JIT_ERROR_LOG_BUFFER,
            d.CUjit_option.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ]
        t0 = time.perf_counter()
        result = d.cuModuleLoadDataEx(image, len(options), options, [error_log, self.LOG_BYTES])
        self.load_s = time.perf_counter() - t0
        if int(result[0]) != 0:
            name, text = _error_strings(result[0])
            log = bytes(error_log).split(b"\0", 1)[0].decode(errors="replace").strip()
            raise CudaError(f"cuModuleLoadDataEx({label})", name, text, log)
        self.handle = result[1]

    def kernel(self, entry: str, grid, block, shared_bytes: int = 0) -> Kernel:
        function = check(
            cu().cuModuleGetFunction(self.handle, entry.encode()),
            f"cuModuleGetFunction({self.label}: {entry})",
        )
        return Kernel(function, entry, tuple(grid), tuple(block), int(shared_bytes))

    def global_variable(self, name: str) -> Buffer:
        """The module's `.global` variable `name` (cuModuleGetGlobal), as a Buffer it owns."""
        ptr, nbytes = check(
            cu().cuModuleGetGlobal(self.handle, name.encode()),
            f"cuModuleGetGlobal({self.label}: {name})",
        )
        return Buffer.at(int(ptr), int(nbytes))

    def unload(self) -> None:
        if self.handle is not None:
            cu().cuModuleUnload(self.handle)
            self.handle = None


# CUDA graphs captured from a stream: what hot mode replays.


class Graph:
    """A CUDA graph captured from whatever `enqueue(stream)` queues on `stream`."""

    def __init__(self, stream: Stream, enqueue):
        d = cu()
        mode = d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        check(d.cuStreamBeginCapture(stream.handle, mode), "cuStreamBeginCapture")
        try:
            enqueue(stream)
        except BaseException:
            result = d.cuStreamEndCapture(stream.handle)
            if int(result[0]) == 0 and result[1] is not None:
                d.cuGraphDestroy(result[1])  # the partial graph
            raise
        self.graph = check(d.cuStreamEndCapture(stream.handle), "cuStreamEndCapture")
        self.exec = None
        try:  # uploaded now, outside any timed region, rather than at its first launch
            self.exec = check(d.cuGraphInstantiate(self.graph, 0), "cuGraphInstantiate")
            check(d.cuGraphUpload(self.exec, stream.handle), "cuGraphUpload")
            stream.synchronize()
        except CudaError:
            if self.exec is None:
                d.cuGraphDestroy(self.graph)
            self.destroy()
            raise

    def launch(self, stream: Stream) -> None:
        check(cu().cuGraphLaunch(self.exec, stream.handle), "cuGraphLaunch")

    def destroy(self) -> None:
        d = cu()
        if self.exec is not None:
            d.cuGraphExecDestroy(self.exec)
            d.cuGraphDestroy(self.graph)
            self.exec = None


PERSISTING_L2_LIMIT = "CU_LIMIT_PERSISTING_L2_CACHE_SIZE"
PERSISTING_L2_HOW = (
    "cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0) once at context setup, read back with "
    "cuCtxGetLimit: no L2 line persists across launches, so no per-launch host-side reset "
    "(cuCtxResetPersistingL2Cache, outside stream order) is made"
)


def _persisting_l2_max_bytes(ctx: Context) -> int | None:
    """The device's largest persisting set-aside (0: it has none, before sm_80), or None."""
    try:
        return ctx.attribute("MAX_PERSISTING_L2_CACHE_SIZE")
    except (AttributeError, CudaError):
        return None


def set_no_persisting_l2(ctx: Context) -> dict:
    """Set the current context's persisting-L2 limit to 0 and read it back.

    {"limit_bytes": read back, "max_bytes": the device's maximum, "how": ...}, with "error"
    where the driver refused the call (MPS fixes the limit at the server's start); a device
    without a persisting L2 (max 0) records limit 0 and is not asked. A sticky error raises."""
    d = cu()
    max_bytes = _persisting_l2_max_bytes(ctx)
    record: dict = {"limit_bytes": 0, "max_bytes": max_bytes, "how": PERSISTING_L2_HOW}
    if max_bytes == 0:
        record["how"] = "the device has no persisting L2 (its maximum set-aside is 0)"
        return record
    try:
        check(
            d.cuCtxSetLimit(getattr(d.CUlimit, PERSISTING_L2_LIMIT), 0),
            f"cuCtxSetLimit({PERSISTING_L2_LIMIT}, 0)",
        )
    except CudaError as exc:
        if exc.sticky:
            raise
        record["error"] = str(exc)
    record["limit_bytes"] = persisting_l2_bytes()
    return record


def persisting_l2_bytes() -> int:
    """The current context's persisting-L2 limit in bytes (cuCtxGetLimit)."""
    d = cu()
    return int(
        check(
            d.cuCtxGetLimit(getattr(d.CUlimit, PERSISTING_L2_LIMIT)),
            f"cuCtxGetLimit({PERSISTING_L2_LIMIT})",
        )
    )


class ModuleState:
    """The `.global` variables of one loaded module and a device copy of each as loaded."""

    def __init__(self, module: Module, names: list[str], stream: Stream):
        """Saves every variable of `names`; one the driver does not find (a name the PTX
        scan took for a variable that is not one) is listed in `missing` instead."""
        self.label = module.label
        self.variables: dict[str, Buffer] = {}
        self.missing: list[str] = []
        self._saved: list[tuple[Buffer, Buffer]] = []
        try:
            for name in names:
                try:
                    variable = module.global_variable(name)
                except CudaError as exc:
                    if exc.name != "CUDA_ERROR_NOT_FOUND":
                        raise
                    self.missing.append(name)
                    continue
                saved = Buffer(variable.nbytes)
                saved.copy_from(variable, stream)
                self.variables[name] = variable
                self._saved.append((variable, saved))
            stream.synchronize()  # the copies are taken before anything launches
        except BaseException:
            self.free()
            raise

    @classmethod
    def of(cls, module: Module, text: str, stream: Stream) -> ModuleState | None:
        """The state of `module` loaded from PTX `text`, or None when it declares no `.global`."""
        names = list(ptx.module_globals(text))
        return cls(module, names, stream) if names else None

    @property
    def nbytes(self) -> int:
        return sum(v.nbytes for v in self.variables.values())

    def restore(self, stream: Stream) -> None:
        """Queue a copy of every variable's saved bytes back into it."""
        for variable, saved in self._saved:
            variable.copy_from(saved, stream)

    def free(self) -> None:
        for _, saved in self._saved:
            saved.free()
        self._saved.clear()
