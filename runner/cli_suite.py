"""`python -m runner bench`: its options and the document it writes (see runner.cli for the rest;
bad input raises runner.errors.BadInput, which runner.cli maps to exit 2).

Named for what it runs, a suite, apart from the Python API runner.bench (runner/bench/)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from protocol.input_files import output_problem
from protocol.progress import Live
from runner.errors import BadInput, NoGpuError


def output_path(folder: bool):
    """click callback of an output option (a file, or a folder): exit 2 with one line naming
    the path and the reason when it cannot be written, before any work ('-' is stdout)."""

    def check(ctx, param, value):
        problem = (
            None
            if value in (None, "-") or str(value) == "-"
            else output_problem(value, folder=folder)
        )
        if problem is not None:
            raise BadInput(f"{param.opts[-1]} {problem}")
        return value

    return check


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


@click.command()
@click.argument("cases", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--case",
    "case_ids",
    multiple=True,
    help="Run only this case (repeatable): a case id, a point id such as 'axpy_f64[n=2^20]', "
    "or a glob of * and ? over either.",
)
@click.option(
    "--point",
    "point_ids",
    multiple=True,
    help="Run only this point of swept cases (repeatable): 'axpy_f64[n=2^20]', 'n=2^20' (every "
    "case that has it) or a glob such as 'axpy_f64[*]'.",
)
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
    type=click.Path(path_type=Path),
    callback=output_path(folder=False),
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
    "auto is CUPTI in cold mode (refused without cupti-python) and events in hot mode. Events "
    "in cold mode only when chosen here (a warning; a series of its own). Recorded in every row.",
)
@click.option(
    "--precision",
    type=Percent(),
    metavar="PERCENT",
    help="Stopping rule: after --samples, keep sampling until every gap's 95% interval (the "
    "A/A control's included, widened by the control's systematic term) has a half-width within "
    "this (e.g. 0.5%), up to --max-samples or --precision-max-s per case; a target under the "
    "control's term stops after --samples (stopped_by floor); a case that does not get there is "
    "marked not converged.",
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
@click.option(
    "--min-samples",
    type=click.IntRange(min=16),
    help="The sequential rule's first rounds (default 24: three a load of the A/A control's "
    "8, the fewest its term is read from): from there a case stops as soon as "
    "every gap's 95% interval, the A/A control's included, is within +-0.25%, else goes on up "
    "to --samples; equal to --samples, every case takes --samples. Not with --precision.",
)
@click.option(
    "--gpus",
    metavar="all|0,1,...",
    help="Deal the cases over these GPUs of this host, one worker per GPU at a time (a case's "
    "implementations always share one GPU); every case records the GPU it ran on.",
)
@click.option(
    "--input-seed",
    type=click.IntRange(0, 2**53 - 1),
    default=None,
    help="Replay a run's inputs: the seed its document records (options.input_seed). By default "
    "every run draws its own, so no timed launch sees inputs an earlier run determined.",
)
@click.option(
    "--previous",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="An earlier result document of the suite: with --gpus, cases are dealt longest first "
    "by the time each took there.",
)
def bench(cases, case_ids, point_ids, **settings):
    """Build, check and time every case of the suite CASES (a cases.toml).

    The result document (JSON) goes to stdout, or to -o FILE (rewritten after every case);
    progress, with the case's position and an estimate of the time left, goes to stderr.
    Exit status: 0 every case ok, 1 some case failed, 2 bad input or no GPU.

    \b
    Examples:
      mkdir -p results && python -m runner bench benchmarks/cases.toml > results/result.json
      python -m runner bench benchmarks/cases.toml --case axpy_f64 --mode cold -o results/a.json
      python -m runner bench benchmarks/cases.toml --bundle bundle/ --budget-s 1500
      python -m runner bench benchmarks/cases.toml --point 'axpy_f64[n=2^21]' -o results/p.json
    """
    from protocol.codec import encode
    from protocol.errors import DocumentError
    from runner.document import write_atomic
    from runner.execution.suite import BenchOptions, run_suite

    def emit(doc) -> None:
        data = encode(doc, pretty=True)
        if options.output:
            try:
                write_atomic(options.output, data)
                return
            except OSError as exc:  # a full disk: the measured document goes to stdout instead
                sys.stdout.buffer.write(data)
                sys.stdout.flush()
                raise BadInput(
                    f"{options.output}: could not write the result document ({exc.strerror or exc}); "
                    "it was written to stdout instead"
                ) from exc
        sys.stdout.buffer.write(data)

    from runner.definition.bundle import parse_bundle_options

    bundle, revisions = parse_bundle_options(settings.pop("bundles"))
    options = BenchOptions(
        case_ids=tuple(case_ids),
        point_ids=tuple(point_ids),
        bundle=bundle,
        revisions=revisions,
        **settings,
    )
    try:
        with Live("runner bench", quiet=options.quiet):  # a status line on a terminal
            doc, status = run_suite(cases, options)
    except NoGpuError as exc:
        suite = shlex.quote(str(cases))
        raise BadInput(
            f"{exc}; from this machine, run the suite on a GPU box with `python -m harness run "
            f"{suite} --target ssh://user@gpu-host`, and validate and compile it here with "
            f"`python -m runner check {suite}`"
        ) from exc
    except DocumentError as exc:
        emit(exc.document)
        raise BadInput(f"internal error, the document was written anyway: {exc}") from exc
    emit(doc)
    sys.exit(status)
