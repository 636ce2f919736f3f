"""`python -m runner`: bench, run, info, check. Exit status: 0 ok, 1 some case failed, 2 bad input or environment."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import click


def _die(message: str, status: int = 2) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(status)


def _print_version(ctx, param, value) -> None:
    if not value or ctx.resilient_parsing:
        return
    from protocol.version import RESULT_SCHEMA_VERSION, RUN_PROTOCOL_VERSION, package_version

    click.echo(
        f"kernelgap runner {package_version()} (result schema {RESULT_SCHEMA_VERSION}, "
        f"run protocol {RUN_PROTOCOL_VERSION})"
    )
    ctx.exit()


class Percent(click.ParamType):
    """A percentage, "0.5%" or "0.5", as the fraction 0.005."""

    name = "percent"

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            return value
        try:
            fraction = float(str(value).strip().removesuffix("%")) / 100
        except ValueError:
            self.fail(f"{value!r} is not a percentage such as 0.5%", param, ctx)
        if not 0 < fraction < 1:
            self.fail(f"{value!r} must be between 0% and 100%, exclusive", param, ctx)
        return fraction


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Print the version and exit.",
)
def main():
    """kernelgap runner: correctness-gated, paired GPU kernel timing.

    Progress, logs and reports go to stderr; stdout carries only the JSON document asked for.
    Also installed as `kernelgap-runner`.

    \b
    Examples:
      python -m runner check benchmarks/cases.toml
      python -m runner bench benchmarks/cases.toml -o results/result.json
    """


@main.command()
@click.argument("cases", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--case", "case_ids", multiple=True, help="Run only this case id (repeatable).")
@click.option(
    "--mode",
    type=click.Choice(["hot", "cold"]),
    help="Timing mode (default: the manifest's, usually hot).",
)
@click.option(
    "--samples", type=click.IntRange(min=30), help="Paired rounds per case (at least 30)."
)
@click.option(
    "--warmup",
    type=click.IntRange(min=0),
    help="Untimed launches per implementation before timing.",
)
@click.option(
    "--target-sample-ms",
    type=click.FloatRange(min=0, min_open=True),
    help="Hot mode: calibrate a sample to about this long.",
)
@click.option(
    "--timeout-s",
    type=click.FloatRange(min=0, min_open=True),
    help="Per-case limit (default: the manifest's, 60 s).",
)
@click.option(
    "--budget-s",
    type=click.FloatRange(min=0, min_open=True),
    help="Wall-time budget for the whole suite: a case running past it is stopped and cases not "
    "started by then are recorded as skipped (not run); exit status 1.",
)
@click.option("--arch", help="Compile for this target (e.g. sm_90) instead of the device's.")
@click.option(
    "--skip-check",
    is_flag=True,
    help="Time without the correctness gate (results then carry no gap).",
)
@click.option("--device", type=int, default=0, show_default=True, help="CUDA device ordinal.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the document here (rewritten after every case) instead of stdout.",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
@click.option(
    "--commit", help="Record this commit as the suite's (default: git of the suite's checkout)."
)
@click.option(
    "--bundle",
    "bundles",
    multiple=True,
    metavar="DIR | LABEL=DIR",
    help="Take PTX from this bundle (python -m runner build) where it has the implementation. "
    "Given as LABEL=DIR two or more times (--bundle base=DIR --bundle head=DIR: one bundle per "
    "compiler revision), each candidate X becomes X@base and X@head, timed in the same rounds, "
    "and each case gets head/base pairs with a paired interval.",
)
@click.option(
    "--emit-partial",
    is_flag=True,
    help="After each case, write the partial document to stderr as one line starting "
    "'kernelgap-partial-document: ' (harness run keeps the last one if the connection drops).",
)
@click.option(
    "--profile",
    is_flag=True,
    help="After each case is timed, profile one launch of every implementation at the timed size "
    "with Nsight Compute (ncu on PATH) and record its counters as `profile` (flagged as profiled "
    "data, kept apart from the timings; harness explain reads them).",
)
@click.option(
    "--no-static",
    "static",
    flag_value=False,
    default=True,
    help="Do not record `static` (ptxas -v resources and the SASS instruction mix from cuobjdump "
    "or nvdisasm, recorded by default where those tools are installed).",
)
@click.option(
    "--timer",
    type=click.Choice(["auto", "events", "cupti"]),
    default="auto",
    show_default=True,
    help="What reads a sample: CUDA events, or CUPTI's kernel timestamps (needs cupti-python); "
    "auto is CUPTI in cold mode where it works and events otherwise. Recorded in every row.",
)
@click.option(
    "--precision",
    type=Percent(),
    metavar="PERCENT",
    help="Stopping rule: after --samples, keep sampling until every gap's 95% interval has a "
    "half-width within this (e.g. 0.5%), up to --max-samples or --precision-max-s per case; "
    "a case that does not get there is marked not converged.",
)
@click.option(
    "--precision-max-s",
    type=click.FloatRange(min=0, min_open=True),
    help="The stopping rule's wall-time cap per case (default 60 s).",
)
@click.option(
    "--max-samples",
    type=click.IntRange(min=30),
    help="The stopping rule's cap on samples per implementation (default 1000).",
)
def bench(cases, case_ids, **settings):
    """Build, check and time every case of the suite CASES (a cases.toml).

    The result document (JSON) goes to stdout, or to -o FILE (rewritten after every case);
    progress, with the case's position and an estimate of the time left, goes to stderr.
    Exit status: 0 every case ok, 1 some case failed, 2 bad input or no GPU.

    \b
    Examples:
      mkdir -p results && python -m runner bench benchmarks/cases.toml > results/result.json
      python -m runner bench benchmarks/cases.toml --case axpy_f64 --mode cold -o results/a.json
      python -m runner bench benchmarks/cases.toml --bundle bundle/ --budget-s 1500
    """
    from protocol.codec import encode
    from protocol.validation import DocumentError
    from runner import driver, manifest
    from runner.bundle import BundleError
    from runner.suite import BenchOptions, run_suite, write_atomic

    def emit(doc) -> None:
        data = encode(doc, pretty=True)
        if options.output:
            try:
                write_atomic(options.output, data)
                return
            except OSError as exc:  # a full disk: the measured document goes to stdout instead
                sys.stdout.buffer.write(data)
                sys.stdout.flush()
                _die(
                    f"{options.output}: could not write the result document ({exc.strerror or exc}); "
                    "it was written to stdout instead"
                )
        sys.stdout.buffer.write(data)

    from runner.revisions import parse_bundle_options

    try:
        bundle, revisions = parse_bundle_options(settings.pop("bundles"))
    except BundleError as exc:
        _die(str(exc))
    options = BenchOptions(case_ids=tuple(case_ids), bundle=bundle, revisions=revisions, **settings)
    try:
        doc, status = run_suite(cases, options)
    except (manifest.ManifestError, BundleError) as exc:
        _die(str(exc))
    except driver.NoGpuError as exc:
        _die(str(exc))
    except DocumentError as exc:
        emit(exc.document)
        _die(f"internal error, the document was written anyway: {exc}")
    emit(doc)
    sys.exit(status)


@main.command("profile-case", hidden=True)
@click.argument("job", type=click.Path(dir_okay=False, exists=True))
def profile_case(job):
    """Launch one implementation once at the timed size (the program ncu profiles for --profile).

    \b
    Example (what runner bench --profile runs under ncu):
      python -m runner profile-case /tmp/kernelgap-profile-job.json
    """
    from protocol.codec import encode
    from runner import driver, manifest
    from runner.explain import profile_launch

    try:
        launched = profile_launch.main(job)
    except (driver.NoGpuError, manifest.ManifestError, ValueError) as exc:
        _die(str(exc))
    except KeyError as exc:
        _die(f"{job}: the job lacks {exc} (it needs manifest, case, impl and ptx)")
    click.echo(encode(launched).decode(), err=True)


@main.command()
def run():
    """Launch one kernel from a JSON request on stdin; one JSON response on stdout.

    The request (schemas/run-request.schema.json): `ptx` (PTX text) or `ptx_base64`, `kernel`
    (the .entry name), `grid` and `block` ([x, y, z]), `shared_bytes`, `params` in kernel order
    ({"type": "f64[]", "values": [...]} for a device array, optionally with "count";
    {"type": "i64", "value": 3} for a scalar; types i32 u32 i64 u64 f32 f64) and `outputs`
    ([{"param": 0}], the arrays to read back). Floats round-trip exactly; NaN and infinities are
    "nan", "inf", "-inf". The response: {"status": "ok", "outputs": [...], "elapsed_ms": ...} or
    {"status": "error", "phase": ..., "error": ...}; exit 0 ok, 2 error.

    \b
    Examples:
      python -m runner run < request.json
      ssh gpu-host 'cd kernelgap && python3 -m runner run' < request.json
    """
    from runner import oneshot

    sys.exit(oneshot.main(sys.stdin.buffer, oneshot.private_stdout()))


@main.command()
def serve():
    """Answer run requests, one JSON line each on stdin, one JSON line each on stdout (same
    documents as `run`, plus `id`), with one CUDA context kept across requests. EOF ends it.

    \b
    Example:
      printf '%s\\n' "$(cat request.json)" | python -m runner serve > answers.jsonl
    """
    from runner import serve as service

    sys.exit(service.run())


@main.command(context_settings={"ignore_unknown_options": False})
@click.argument("ptx_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--kernel", required=True, help="The .entry to launch.")
@click.option(
    "--param",
    "params",
    multiple=True,
    help="T:V (scalar) or T[]:V,V,... (array), T one of i32 u32 i64 u64 f32 f64; in order.",
)
@click.option("--grid", default="1,1,1", show_default=True, help="X,Y,Z")
@click.option("--block", default="1,1,1", show_default=True, help="X,Y,Z")
@click.option("--output-param", type=int, default=0, show_default=True, help="Param to print.")
@click.option("--output-count", type=int, default=None, help="Elements to print (default all).")
@click.option("--timeout-s", type=click.FloatRange(min=0, min_open=True), default=60.0)
def launch(ptx_file, kernel, params, grid, block, output_param, output_count, timeout_s):
    """Launch KERNEL.ptx once and print the output param as comma-separated values (the command
    line of the C++ runner compiler test suites call; exit 1 with `Error: ...` on failure).

    \b
    Example:
      python -m runner launch k.ptx --kernel main --param 'i64[]:1,2,3' --param i64:2 \\
          --grid 1,1,1 --block 3,1,1 --output-param 0 --output-count 3
    """
    from runner import launch as launcher
    from runner import oneshot

    try:
        text = ptx_file.read_text()
        document = launcher.request(
            text, kernel, list(params), grid, block, output_param, output_count, timeout_s
        )
    except OSError as exc:
        click.echo(f"Error: cannot open {ptx_file}: {exc.strerror}", err=True)
        sys.exit(1)
    except launcher.LaunchArgumentError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    sys.exit(launcher.run(document, io.TextIOWrapper(oneshot.private_stdout(), encoding="utf-8")))


@main.command()
@click.option("--device", type=int, default=0, show_default=True)
@click.option(
    "--no-bandwidth",
    is_flag=True,
    help="Skip the device-to-device copy that measures peak bandwidth.",
)
def info(device, no_bandwidth):
    """Print the environment block (GPU, driver, clocks, software) as JSON.

    \b
    Example:
      python -m runner info --no-bandwidth
    """
    from protocol.codec import encode
    from runner import driver, environment

    try:
        with driver.Context(device) as ctx:
            env = environment.capture(ctx, measure_bandwidth=not no_bandwidth)
    except driver.NoGpuError as exc:
        _die(str(exc))
    sys.stdout.buffer.write(encode(env, pretty=True))


@main.command()
@click.argument("cases", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--arch", default="sm_90", show_default=True, help="Target to compile and assemble for."
)
@click.option(
    "--require-ptxas",
    is_flag=True,
    help="Fail when ptxas is not installed (CI) instead of only compiling.",
)
@click.option(
    "--require-all",
    is_flag=True,
    help="Fail when any implementation is skipped because its compiler is not installed (CI).",
)
def check(cases, arch, require_ptxas, require_all):
    """Validate the manifest and build every implementation it can (no GPU needed); ptxas where present.

    The report (one line per implementation, then a summary counting skips by reason) goes to
    stderr; the verdict is the exit status: 0 ok, 1 a failure (or, with --require-all, a skip),
    2 bad input.

    \b
    Example:
      python -m runner check benchmarks/cases.toml --require-ptxas --require-all
    """
    from runner import lock, manifest
    from runner.checking import check_suite
    from runner.toolchains import cuda_programs

    if require_ptxas and cuda_programs.find("ptxas") is None:
        _die(
            "ptxas is not on PATH (--require-ptxas): install the CUDA toolkit, or "
            "`pip install 'kernelgap[nvcc]'` (NVIDIA's nvcc and ptxas wheels)"
        )
    try:
        suite = manifest.load(cases)
        problems = lock.verify(suite) if lock.lock_path(suite).exists() else []
    except (manifest.ManifestError, lock.LockError) as exc:
        _die(str(exc))
    for problem in problems:
        click.echo(f"FAIL  {problem}", err=True)
    status = check_suite(suite, arch, require_all)
    sys.exit(1 if problems else status)


@main.command()
@click.argument("cases", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Bundle folder to write.",
)
@click.option("--arch", default="sm_90", show_default=True, help="Target to compile for.")
@click.option(
    "--no-static",
    "static",
    flag_value=False,
    default=True,
    help="Do not record each implementation's static analysis (ptxas -v resources, SASS "
    "instruction mix, occupancy) in bundle.json; harness explain BUNDLE reads it.",
)
def build(cases, out, arch, static):
    """Build every implementation it can into a PTX bundle (no GPU needed) for `bench --bundle`.

    \b
    Example:
      python -m runner build benchmarks/cases.toml --out bundle/ --arch sm_90
    """
    from runner import manifest
    from runner.bundle import write_bundle

    try:
        suite = manifest.load(cases)
    except manifest.ManifestError as exc:
        _die(str(exc))
    result = write_bundle(suite, arch, out, lambda text: click.echo(text, err=True), static)
    click.echo(
        f"{out}/bundle.json: {len(result['implementations'])} built, "
        f"{len(result['skipped'])} skipped or failed",
        err=True,
    )
    sys.exit(1 if result["failures"] else 0)


@main.command("lock")
@click.argument("cases", type=click.Path(dir_okay=False, path_type=Path))
def lock_command(cases):
    """Record the content hash of every new (case, version) in the suite's .lock file.

    \b
    Example:
      python -m runner lock benchmarks/cases.toml
    """
    from runner import lock, manifest

    try:
        suite = manifest.load(cases)
        added = lock.record(suite)
    except (manifest.ManifestError, lock.LockError) as exc:
        _die(str(exc))
    for case_id, version in added:
        click.echo(f"recorded {case_id} version {version} in {lock.lock_path(suite)}", err=True)
    if not added:
        click.echo(f"{lock.lock_path(suite)}: every case version is already recorded", err=True)
