"""The small program that Nsight Compute profiles: one launch of one implementation at the timed
size (`python -m runner.execution.profile_launch JOB.json`, run under ncu by
runner.explain.profiling), and that compute-sanitizer checks at the check size
(runner.execution.sanitize). The tools start this module, never the command line; the hidden
`runner profile-case JOB.json` runs the same `main` by hand.

It loads the implementation's PTX, generates the case's inputs on the device exactly as the
timing phase does, launches the kernel once and exits. ncu's kernel filter picks that launch out
of the generator's; nothing here is timed, and nothing here is ever part of a timed sample.
JOB.json: {"manifest", "case", "impl", "ptx", "device", "size"}; size is "timed" (the default:
the case's dims) or "check" (its check_dims, with outputs poisoned first so that a tool that
tracks uninitialised reads sees them written).
"""

from __future__ import annotations

from protocol.codec import decode
from runner.errors import ManifestError, NoGpuError


def launch_once(job: dict) -> dict:
    """Inputs at the job's size, one launch of the implementation, synchronize; what ran."""
    from runner.definition import manifest
    from runner.execution.case import fits_device, resolve_kernel
    from runner.gpu import driver
    from runner.measurement.gate import correctness as gate
    from runner.measurement.timing.cuda import InternalKernels

    suite = manifest.load(job["manifest"])
    case = suite.case(job["case"])
    impl = case.impl(
        job["impl"].partition("@")[0]
    )  # a revision X@head is X (runner.definition.bundle)
    size = job.get("size", "timed")
    if size not in ("timed", "check"):
        raise ValueError(f"profile job: size must be 'timed' or 'check' (got {size!r})")
    geometry = case.geometry(case.dims if size == "timed" else case.check_dims)
    with driver.Context(job.get("device", 0)) as ctx:
        stream = driver.Stream()
        internal = InternalKernels(ctx)
        module = driver.Module(job["ptx"], f"{case.id}/{impl.name}")
        try:
            fits_device(case, geometry)
            buffers = gate.DeviceBuffers(case, geometry, internal, stream)
            try:
                buffers.fill_inputs()
                if size == "check":
                    buffers.poison_outputs(0xFF)
                stream.synchronize()
                kernel = resolve_kernel(module, impl.entry, geometry)
                kernel.launch(stream, buffers.kernel_args())
                stream.synchronize()
            finally:
                buffers.free()
        finally:
            module.unload()
            internal.close()
            stream.destroy()
    return {
        "case": case.id,
        "impl": impl.name,
        "entry": impl.entry,
        "size": size,
        "dims": geometry.dims,
        "grid": list(geometry.grid),
        "block": list(geometry.block),
        "shared_bytes": geometry.shared_bytes,
        "launches": 1,
    }


def main(job_path: str) -> dict:
    with open(job_path, "rb") as f:
        return launch_once(decode(f.read(), job_path))


def run_job(job_path: str) -> tuple[dict | None, str | None]:
    """(what ran, None), or (None, why not) for a job that cannot run: no GPU, a bad suite or
    job (the error names the file and what it lacks)."""

    try:
        return main(job_path), None
    except (NoGpuError, ManifestError, ValueError) as exc:
        return None, str(exc)
    except KeyError as exc:
        return None, f"{job_path}: the job lacks {exc} (it needs manifest, case, impl and ptx)"


if __name__ == "__main__":
    import sys

    from protocol.codec import encode
    from protocol.progress import visible

    if len(sys.argv) != 2:
        sys.exit("usage: python -m runner.execution.profile_launch JOB.json")
    launched, problem = run_job(sys.argv[1])
    if problem is not None:
        sys.stderr.write(f"error: {visible(problem, lines=True)}\n")
        sys.exit(2)
    sys.stderr.write(encode(launched).decode() + "\n")
