"""`python -m runner`: bench, run, info, check. Exit status: 0 ok, 1 some case failed, 2 bad input or environment."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from protocol.input_files import os_error_line
from protocol.progress import visible
from protocol.version import version_option
from runner.cli_suite import bench, output_path
from runner.errors import BAD_INPUT, BadInput, NoGpuError, ToolMissing


def _die(message: str) -> None:
    click.echo(f"error: {visible(message, lines=True)}", err=True)
    sys.exit(2)


class Commands(click.Group):
    """Every command's last word on bad input (runner.errors.BAD_INPUT) or a file it could not
    read or write: one line, exit 2. The one place the runner's commands map bad input."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BAD_INPUT as exc:
            _die(str(exc))
        except OSError as exc:
            line = os_error_line(exc)
            if line is None:
                raise
            _die(line)


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@version_option("runner")
def main():
    """kernelgap runner: correctness-gated, paired GPU kernel timing.

    Progress, logs and reports go to stderr; stdout carries only the JSON document asked for.
    Also installed as `kernelgap-runner`.

    \b
    Examples (cases.toml: a suite of yours; a clone has benchmarks/cases.toml):
      python -m runner check cases.toml
      python -m runner bench cases.toml -o result.json
      python -m runner info --no-bandwidth
    """


main.add_command(bench)


@main.command("profile-case", hidden=True)
@click.argument("job", type=click.Path(dir_okay=False, exists=True))
def profile_case(job):
    """Launch one implementation once at the timed size (the program ncu profiles for --profile).

    \b
    Example (what runner bench --profile runs under ncu):
      python -m runner profile-case /tmp/kernelgap-profile-job.json
    """
    from protocol.codec import encode
    from runner.execution import profile_launch

    launched, problem = profile_launch.run_job(job)
    if problem is not None:
        raise BadInput(problem)
    click.echo(encode(launched).decode(), err=True)


@main.command(context_settings={"ignore_unknown_options": True})
@click.option(
    "--no-service", is_flag=True, help="Launch in this process, with a context of its own."
)
@click.argument(
    "files", nargs=-1, type=click.UNPROCESSED, metavar="[PTX_FILE REQUEST.json RESULT.json]"
)
def run(no_service: bool, files):
    """Launch one kernel from a JSON run request: on stdin, answered on stdout (exit 0 whenever
    an answer was written: its `status` says ok or error), or with PTX_FILE REQUEST.json
    RESULT.json, the PTX from a file (trailing NUL bytes removed), the answer in RESULT.json
    (exit 0 ok, 1 error). A request file may leave out `grid` and `block` ([1, 1, 1]),
    `params` and `outputs` ([]). The launch goes to this user's launch service (as `launch`'s
    does) unless --no-service.

    The request (schemas/run-request.schema.json): `ptx` (PTX text) or `ptx_base64`, `kernel`
    (the .entry name), `grid` and `block` ([x, y, z]), `shared_bytes`, `params` in kernel order
    ({"type": "f64[]", "values": [...]} for a device array, optionally with "count";
    {"type": "i64", "value": 3} for a scalar; types i32 u32 i64 u64 f32 f64) and `outputs`
    ([{"param": 0}], the arrays to read back). Floats round-trip exactly; NaN and infinities are
    "nan", "inf", "-inf". The answer: {"status": "ok", "outputs": [{"param", "type", "values"}],
    "elapsed_ms": ...} or {"status": "error", "phase": ..., "error": ...}.

    \b
    Examples:
      python -m runner run < request.json
      ssh gpu-host python3 -m runner run < request.json
      python -m runner run kernel.ptx request.json result.json
    """
    from runner.launch import launch_command

    sys.exit(launch_command.run_main([*(["--no-service"] if no_service else []), *files]))


@main.command()
@click.option(
    "--socket",
    "socket_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Listen on this Unix socket instead of stdin (what `runner launch` starts and reaches).",
)
@click.option(
    "--idle-timeout-s",
    type=click.FloatRange(min=0, min_open=True, max=1e7),
    default=600.0,
    show_default=True,
    help="With --socket: end after this long with no connection open.",
)
@click.option(
    "--max-line-bytes",
    type=click.IntRange(min=1),
    default=1 << 30,
    show_default=True,
    help="Refuse (and skip, reading on in bounded chunks) a line longer than this.",
)
@click.option(
    "--ready-token",
    default=None,
    help='Write {"ready": TOKEN} as the first stdout line, before any answer.',
)
def serve(socket_path, idle_timeout_s, max_line_bytes: int, ready_token: str | None):
    """Answer run requests, one JSON line each on stdin, one JSON line each on stdout (same
    documents as `run`, plus `id`), with one CUDA context kept across requests. EOF ends it.

    \b
    Example:
      printf '%s\\n' "$(cat request.json)" | python -m runner serve > answers.jsonl
    """
    from runner.launch import serve as service

    args = ["--max-line-bytes", str(max_line_bytes)]
    if ready_token is not None:
        args += ["--ready-token", ready_token]
    if socket_path is not None:
        args += ["--socket", str(socket_path), "--idle-timeout-s", str(idle_timeout_s)]
    sys.exit(service.run(args))


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def launch(args):
    """Launch KERNEL.ptx once and print the output param as comma-separated values: the command
    line of the C++ runner compiler test suites call (exit 1 with `Error: ...` on failure).

    The launch goes to this user's launch service for this GPU (started on first use, ended
    after 10 minutes idle), so a call costs a small process and one answer instead of a CUDA
    context; `--no-service` launches in this process. `--timeout-s S` ends a hung kernel.

    \b
    Example:
      python -m runner launch k.ptx --kernel main --param 'i64[]:1,2,3' --param i64:2 \\
          --grid 1,1,1 --block 3,1,1 --output-param 0 --output-count 3
    """
    from runner.launch import launch_command

    sys.exit(launch_command.main(list(args)))


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
    from runner.gpu import driver
    from runner.measurement import environment

    with driver.Context(device) as ctx:
        env = environment.capture(ctx, measure_bandwidth=not no_bandwidth)
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
@click.option(
    "--sanitize",
    is_flag=True,
    help="On a GPU box: launch every implementation once at the check size under "
    "compute-sanitizer (one process per tool); any error it reports fails the check.",
)
@click.option(
    "--sanitize-tools",
    default="memcheck,racecheck,synccheck,initcheck",
    show_default=True,
    help="compute-sanitizer tools for --sanitize: memcheck, racecheck, synccheck, initcheck.",
)
@click.option(
    "-o",
    "--out",
    "out",
    type=click.Path(path_type=Path),
    default=None,
    callback=output_path(folder=False),
    help="With --sanitize: write the sanitize document (schemas/sanitize.schema.json) here "
    "('-' for stdout).",
)
@click.option("--device", type=int, default=0, show_default=True, help="GPU for --sanitize.")
@click.option(
    "--bundle",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Take PTX from this bundle (python -m runner build) where it has the implementation, "
    "so a GPU box without every compiler checks and sanitizes what was built elsewhere.",
)
@click.option(
    "--manifest-only",
    is_flag=True,
    help="Only load and validate the manifest (schema, sizes, expressions, files): nothing is "
    "compiled and no reference is imported. `harness run` runs this before reaching a target.",
)
@click.option("-q", "--quiet", is_flag=True, help="Report only failures and the summary.")
def check(
    cases,
    arch,
    require_ptxas,
    require_all,
    sanitize,
    sanitize_tools,
    out,
    device,
    bundle,
    manifest_only,
    quiet,
):
    """Validate the manifest and build every implementation it can (no GPU needed); ptxas where present.

    The report (one line per implementation, then a summary counting skips by reason) goes to
    stderr; the verdict is the exit status: 0 ok, 1 a failure (or, with --require-all, a skip,
    or with --sanitize an error compute-sanitizer reported), 2 bad input or environment.

    A suite is code: this runs its compilers and command templates and imports its reference
    modules (bounded by each case's timeout_s), as you. Check only suites you would run as a
    build script; --manifest-only runs none of it.

    \b
    Examples:
      python -m runner check benchmarks/cases.toml --require-ptxas --require-all
      python -m runner check benchmarks/cases.toml --sanitize -o sanitize.json
      python -m runner check benchmarks/cases.toml --bundle bundle/ --sanitize -o sanitize.json
    """
    from runner.definition import lock, manifest
    from runner.definition.bundle import Bundle
    from runner.execution.checking import check_suite
    from runner.explain import static

    if manifest_only:
        suite = manifest.load(cases)
        click.echo(f"{cases}: {len(suite.cases)} cases, manifest valid", err=True)
        sys.exit(0)
    if out is not None and not sanitize:
        raise BadInput("-o/--out writes the sanitize document: it needs --sanitize")
    sanitizer_path, tool_names = None, ()
    if sanitize:
        sanitizer_path, tool_names = _sanitize_setup(sanitize_tools, device)

    if require_ptxas and static.find_program("ptxas") is None:
        raise BadInput(
            "ptxas is not on PATH (--require-ptxas): install the CUDA toolkit, or "
            "`pip install 'kernelgap[nvcc]'` (NVIDIA's nvcc and ptxas wheels)"
        )
    suite = manifest.load(cases)
    problems = lock.verify(suite) if lock.lock_path(suite).exists() else []
    built = Bundle.load(bundle) if bundle is not None else None
    for problem in problems:
        click.echo(f"FAIL  {visible(problem, lines=True)}", err=True)
    sanitizer = None
    if sanitize:
        from runner.execution.sanitize import Sanitizer

        sanitizer = Sanitizer(suite, tool_names, sanitizer_path, device, _report(quiet))
    status = check_suite(suite, arch, require_all, sanitizer, built, _report(quiet))
    if sanitizer is not None:
        _write_sanitize_document(sanitizer.document(), out)
    sys.exit(1 if problems else status)


def _report(quiet: bool):
    """The report line writer of `runner build` and `runner check`: stderr, control characters
    made visible; with -q only the failures (FAIL lines), the summary being written apart."""

    def say(text: str) -> None:
        if not quiet or text.startswith("FAIL"):
            click.echo(visible(text, lines=True), err=True)

    return say


def _sanitize_setup(tool_text: str, device: int) -> tuple[str, tuple[str, ...]]:
    """compute-sanitizer's path and the tools to run; exit 2 when either is missing or no GPU."""
    from runner.execution.sanitize import parse_tools
    from runner.explain import static
    from runner.gpu import driver

    try:
        tool_names = parse_tools(tool_text)
        path = static.require("compute-sanitizer")
        with driver.Context(device):
            pass
    except (ValueError, ToolMissing, NoGpuError) as exc:
        raise BadInput(f"runner check --sanitize: {exc}") from exc
    return path, tool_names


def _write_sanitize_document(document: dict, out: Path | None) -> None:
    from protocol.codec import encode
    from protocol.validation import validate

    validate(document, "sanitize")
    s = document["summary"]
    click.echo(
        f"sanitize: {s['runs']} run(s): {s['clean']} clean, {s['errors']} with errors, "
        f"{s['failed']} failed",
        err=True,
    )
    if out is None:
        return
    data = encode(document, pretty=True)
    if str(out) == "-":
        sys.stdout.buffer.write(data)
    else:
        from runner.document import write_atomic

        write_atomic(out, data)
        click.echo(f"{out}: sanitize document written", err=True)


@main.command()
@click.argument("cases", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    callback=output_path(folder=True),
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
@click.option("-q", "--quiet", is_flag=True, help="Report only failures and the summary.")
def build(cases, out, arch, static, quiet):
    """Build every implementation it can into a PTX bundle (no GPU needed) for `bench --bundle`.

    \b
    Example:
      python -m runner build benchmarks/cases.toml --out bundle/ --arch sm_90
    """
    from runner.definition import manifest
    from runner.definition.bundle import write_bundle

    suite = manifest.load(cases)
    result = write_bundle(suite, arch, out, _report(quiet), static)
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
    from runner.definition import lock, manifest

    suite = manifest.load(cases)
    added = lock.record(suite)
    for case_id, version in added:
        click.echo(
            visible(f"recorded {case_id} version {version} in {lock.lock_path(suite)}"), err=True
        )
    if not added:
        click.echo(f"{lock.lock_path(suite)}: every case version is already recorded", err=True)
