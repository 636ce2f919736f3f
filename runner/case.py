"""One case on the GPU, in phases: load, inputs, check, timing. Runs inside a worker process.

Every implementation's PTX is loaded into the one context of this process; the case is
timed only if every implementation passed the gate. Whatever was measured before a
failure stays in the record, which names the phase and the CUDA error.
"""

from __future__ import annotations

import time
from dataclasses import replace

from runner import driver, gate, manifest, ptx
from runner.timing import TimingSettings, measure
from runner.timing.cuda import CudaBackend, InternalKernels, Launchable

DYNAMIC_SHARED_DEFAULT_LIMIT = 48 * 1024


class PhaseError(RuntimeError):
    def __init__(self, phase: str, message: str, cuda_error: str | None = None):
        super().__init__(message)
        self.phase, self.cuda_error = phase, cuda_error


def error_record(phase: str, exc: BaseException) -> dict:
    record = {"phase": phase, "message": str(exc) or type(exc).__name__}
    if isinstance(exc, driver.CudaError):
        record["cuda_error"] = exc.name
    elif isinstance(exc, PhaseError) and exc.cuda_error:
        record["cuda_error"] = exc.cuda_error
    return record


def _kernel(module: driver.Module, entry: str, geometry: manifest.Geometry) -> driver.Kernel:
    kernel = module.kernel(entry, geometry.grid, geometry.block, geometry.shared_bytes)
    if geometry.shared_bytes > DYNAMIC_SHARED_DEFAULT_LIMIT:
        d = driver.cu()
        attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        driver.check(
            d.cuFuncSetAttribute(kernel.function, attr, geometry.shared_bytes),
            f"cuFuncSetAttribute({entry})",
        )
    return kernel


def run_case(job: dict, emit) -> dict:
    """Run the case that `job` names; `emit(event_dict)` reports phases as they start."""
    suite = manifest.load(job["manifest"])
    case = suite.case(job["case"])
    settings = TimingSettings(**job["timing"])
    names = [i.name for i in case.impls if i.name in job["ptx"]]
    record = {"impls": {n: {} for n in names}, "phases_s": {}}
    state = {"phase": "setup"}

    def phase(name: str, **extra):
        state["phase"] = name
        emit({"event": "phase", "phase": name, **extra})

    ctx = stream = internal = None
    modules: dict[str, driver.Module] = {}
    try:
        phase("setup")
        ctx = driver.Context(job.get("device", 0))
        stream = driver.Stream()
        internal = InternalKernels(ctx)

        phase("load")
        for name in names:
            text = job["ptx"][name]
            module_info = ptx.parse(text)
            modules[name] = driver.Module(text, f"{case.id}/{name}")
            record["impls"][name]["load_s"] = modules[name].load_s
            record["impls"][name]["ptx"] = ptx.describe(module_info)

        reference = manifest.load_reference(suite, case)
        base_tol = gate.Tolerance(case.rtol, case.atol, case.exact)
        cross_tol = replace(
            base_tol, rtol=2 * case.rtol, atol=2 * case.atol
        )  # both sides may err by tol

        if not job.get("skip_check"):
            phase("check")
            t0 = time.perf_counter()
            geometry = case.geometry(case.check_dims)
            buffers = gate.DeviceBuffers(case, geometry, internal, stream)
            try:
                host_inputs = buffers.host_inputs()
                expected = gate.expected_outputs(case, geometry, reference, host_inputs)
                args = buffers.kernel_args()
                outputs = {}
                ordered = [case.baseline.name] + [n for n in names if n != case.baseline.name]
                for name in ordered:
                    if name not in modules:
                        continue
                    kernel = _kernel(
                        modules[name],
                        case.impls[[i.name for i in case.impls].index(name)].entry,
                        geometry,
                    )
                    try:
                        check, outputs[name] = gate.check_impl(
                            case,
                            buffers,
                            lambda k=kernel: k.launch(stream, args),
                            expected,
                            host_inputs,
                            base_tol,
                        )
                    except driver.CudaError as exc:
                        record["impls"][name]["check"] = {
                            "status": "failed",
                            "problems": [str(exc)],
                            "cuda_error": exc.name,
                        }
                        raise PhaseError(
                            "check", f"implementation {name}: {exc}", exc.name
                        ) from exc
                    if name != case.baseline.name and case.baseline.name in outputs:
                        gate.cross_check(
                            check,
                            outputs[name],
                            case.baseline.name,
                            outputs[case.baseline.name],
                            case,
                            cross_tol,
                        )
                    record["impls"][name]["check"] = check
            finally:
                buffers.free()
            record["phases_s"]["check_s"] = time.perf_counter() - t0
            failed = [
                n for n in names if record["impls"][n].get("check", {}).get("status") != "passed"
            ]
            if failed:
                details = "; ".join(
                    f"{n}: {' / '.join(record['impls'][n]['check']['problems'][:3])}"
                    for n in failed
                )
                raise PhaseError(
                    "check", f"correctness gate failed for {', '.join(failed)}: {details}"
                )

        phase("inputs")
        t0 = time.perf_counter()
        geometry = case.geometry(case.dims)
        buffers = gate.DeviceBuffers(case, geometry, internal, stream)
        pristine = []
        try:
            buffers.fill_inputs()
            for b in case.buffers:
                if b.role == "inout":
                    copy = driver.Buffer(buffers.buffers[b.name].nbytes)
                    copy.copy_from(buffers.buffers[b.name], stream)
                    pristine.append((buffers.buffers[b.name], copy))
            stream.synchronize()
            record["phases_s"]["inputs_s"] = time.perf_counter() - t0
            args = buffers.kernel_args()
            launchables = {
                n: Launchable(
                    _kernel(modules[n], next(i.entry for i in case.impls if i.name == n), geometry),
                    args,
                )
                for n in names
            }
            phase("timing", mode=settings.mode)
            backend = CudaBackend(stream, internal, launchables, pristine, settings.graph_launches)
            try:
                m = measure(backend, names, settings)
            finally:
                backend.close()
            ctx.synchronize()
        finally:
            for _, copy in pristine:
                copy.free()
            buffers.free()
        record["measurement"] = {
            "mode": m.mode,
            "warmup": m.warmup,
            "wall_s": m.wall_s,
            "orders": m.orders,
            "impls": {n: vars(t) for n, t in m.impls.items()},
        }
        record["status"] = "ok"
    except BaseException as exc:
        record["status"] = "failed"
        record["error"] = error_record(getattr(exc, "phase", state["phase"]), exc)
        record["sticky"] = (isinstance(exc, driver.CudaError) and exc.sticky) or bool(
            isinstance(exc, PhaseError) and exc.cuda_error in driver.STICKY_ERRORS
        )
        if isinstance(exc, KeyboardInterrupt):
            raise
    finally:
        if not record.get("sticky"):
            for module in modules.values():
                module.unload()
            if internal is not None:
                internal.close()
            if stream is not None:
                stream.destroy()
            if ctx is not None:
                ctx.close()
    return record
