"""Semantic versions of the documents that cross a process or machine boundary.

Major means breaking: a reader refuses a document whose major version is newer than its own.
"""

from __future__ import annotations

from protocol.errors import VersionError

# 1.3.0: `static` and `profile` per implementation; 1.4.0: revisions; 1.5.0: timing.timer,
# clocks per sample, the precision stopping rule, outputs verified after timed launches;
# 1.6.0: gap.systematic (the interval adds what stays fixed within a run); 1.7.0: a cold sample
# is the mean of timing.batch launches (a new series: harness.history.series), precision.stopped_by
# "floor", systematic with a cold launch's placement; 1.8.0: timing.audit (cold read-backs and
# hot audits), check.inputs_passed and rounding_shortcuts, throughput.bound, timing.method_class
# and cupti_span, gap.bootstrap, environment.sharing, violation time per sample, headline fields;
# 1.9.0: phases_s per case names every phase (setup, load, reference sample, audit sets, timing,
# integrity, teardown; build, static, worker start and exit on the host)
# 1.9.0: a case's aa_control (the in-run A/A control) and gap.systematic_source
# 1.9.0: timing.timer_reason (why the timer: cold by events only as an explicit choice) and
# environment.persisting_l2 (the persisting-L2 limit, set to 0 and read back)
# 1.10.0: aa_control.loads_per_group (cold: a sample of the control takes a group of loads in
# turn) and aa_control.apart (its interval excludes 1: the term is at least its offset); a
# case's `sequential` (runner bench's stopping rule), aa_control.clusters (runner.bench)
# 1.10.0: sweeps: a swept case's point, axes, points and curve; summary.points
# 1.11.0: summary.geomean_gap's covers and across_cards (the headline's interval across cards of
# the GPU model beside this run's)
# 1.12.0: options.input_seed and (python) settings.input_seed, the run's inputs drawn per run;
# (python) integrity.cold_sample (a cold sample's kernel count and summed inter-kernel gap),
# integrity.comparison (where the comparison ran), integrity.recheck never left out (issue 50)
RESULT_SCHEMA_VERSION = "1.12.0"
RUN_PROTOCOL_VERSION = "1.1.0"  # 1.1.0: `id`, data_base64 arrays, base64 outputs


def version_tuple(version) -> tuple[int, ...]:
    """(major, minor, patch) of a semantic version string; ValueError when it is not one."""
    parts = tuple(int(p) for p in str(version).split("."))
    if len(parts) != 3:
        raise ValueError(f"{version!r} is not a semantic version")
    return parts


def check_version(found: str, supported: str, what: str) -> None:
    """Refuse `found` if its major version is not the one this tool understands."""
    try:
        major = int(str(found).split(".", 1)[0])
    except ValueError:
        raise VersionError(f"{what}: schema_version {found!r} is not a semantic version") from None
    ours = int(supported.split(".", 1)[0])
    if major > ours:
        raise VersionError(
            f"{what}: schema_version {found} is newer than this tool understands ({supported}); "
            "upgrade kernelgap to read it"
        )
    if major < ours:
        raise VersionError(
            f"{what}: schema_version {found} is older than {supported} and has no migration"
        )


def package_version() -> str:
    """kernelgap's version: the installed distribution's, else a checkout's pyproject.toml.

    A plain checkout run through PYTHONPATH (the GPU box) has no installed metadata; a tree
    that has neither (a shipped copy without pyproject.toml) says "unknown".
    """
    import tomllib
    from importlib import metadata
    from pathlib import Path

    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        return tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        pass
    try:
        return metadata.version("kernelgap")
    except metadata.PackageNotFoundError:
        return "unknown"


def version_option(tool: str):
    """The --version flag of kernelgap's `tool` command group ("runner" or "harness"): prints
    `kernelgap <tool> <version> (result schema ...)`, the runner with the run protocol it
    speaks, and exits."""
    import click

    def show(ctx, param, value) -> None:
        if not value or ctx.resilient_parsing:
            return
        speaks = f"result schema {RESULT_SCHEMA_VERSION}"
        if tool == "runner":
            speaks += f", run protocol {RUN_PROTOCOL_VERSION}"
        click.echo(f"kernelgap {tool} {package_version()} ({speaks})")
        ctx.exit()

    return click.option(
        "--version",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=show,
        help="Print the version and exit.",
    )


SANITIZE_SCHEMA_VERSION = (
    "1.0.0"  # `runner check --sanitize -o FILE` (schemas/sanitize.schema.json)
)
