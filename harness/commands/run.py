"""`harness run`: ship the suite to a GPU box, run the runner there, keep its result document.

One session per invocation: `--target local`, `ssh://user@host[:port]` (one SSH connection) or
`vast:<GPU model>` (one rented machine, destroyed at the end; `--max-price` refuses offers above
a price ceiling). Every step (installing
dependencies, GPU tests, the benchmark) runs in that one session; each step ships the tree
(`harness.running.shipping`) as one tar stream on the same SSH invocation that runs it
(harness.running.session). Here: the command's options, the transport for --target, stop
signals, and the steps in order.

Exit status: 0 every case ok, 1 some case failed (the document is still saved) or the GPU tests
failed, 2 bad input, no GPU, an unreachable target, no offer under the price ceiling, a
timeout or a dropped connection (what had
arrived on stdout is kept in a `.partial` file), a document that --out cannot take (a full
disk: it is kept under the temporary folder, or on stdout, harness.running.result_files), 128 + N when signal N (SIGTERM, SIGHUP) stopped
it, after the session was closed and any rented machine destroyed.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from pathlib import Path

import click

from harness.commands.document_files import out_folder
from harness.errors import RevisionBuildError, RunFailed, SshTargetError, Terminated, TransportError
from harness.running import cluster as cluster_run
from harness.running import manifest_check, revision_build, shipping
from harness.running.session import INSTALL_TIMEOUT_S, Session
from harness.running.transport.base import Transport
from harness.running.transport.local import LocalTransport
from harness.running.transport.ssh import SshTarget, SshTransport
from harness.running.transport.vast import DEFAULT_IMAGE, VastTransport
from protocol.input_files import checkout_commit
from protocol.progress import Live

__all__ = ["local_commit", "make_transport", "run", "signals_interrupt"]

RENTAL_GRACE_S = 3600.0  # a rental's lifetime beyond its steps' limits: waiting for it, SSH, slack


@contextlib.contextmanager
def signals_interrupt(signums=(signal.SIGTERM, signal.SIGHUP)):
    """Inside: SIGTERM and SIGHUP (CI cancelling, a job timeout, a closed terminal) raise
    `Terminated`, so the transport's `__exit__` runs and a rented machine is destroyed; the
    Python default would end the process on the spot. Later ones are ignored while that cleanup
    runs. The previous handlers are restored on leaving."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return

    def ignore(signum, frame):
        pass

    def interrupt(signum, frame):
        for each in signums:  # a function, not SIG_IGN: SIG_IGN would pass to ssh children
            signal.signal(each, ignore)
        raise Terminated(signum)

    previous = {signum: signal.signal(signum, interrupt) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def local_commit(path: Path) -> str | None:
    """The commit of the checkout holding `path`, with "-dirty" when it has changes (a result
    file's name and the run's settings); None outside a checkout."""
    found = checkout_commit(path)
    if found["commit"] is None:
        return None
    return found["commit"] + ("-dirty" if found["dirty"] else "")


def make_transport(
    target: str,
    *,
    identity: Path | None,
    known_hosts: Path | None,
    connect_timeout_s: float,
    python: str | None,
    vast_image: str = DEFAULT_IMAGE,
    lifetime_s: float | None = None,
    max_price: float | None = None,
) -> Transport:
    """The transport for `--target`: local, ssh://user@host[:port] or vast:<GPU model>.

    `lifetime_s` (vast only): how long the rental may live; its label carries start + this as
    the time after which another run's sweep may destroy it as an orphan. `max_price` (vast
    only): the most it may cost, in USD per hour; offers above it are never rented."""
    if max_price is not None and not target.startswith("vast:"):
        raise SshTargetError(
            f"--max-price applies to vast:<GPU model> targets only (a rental's price), not to "
            f"--target {target!r}"
        )
    if target == "local":  # the interpreter running the harness: an unactivated venv works
        return LocalTransport(python or sys.executable)
    python = python or "python3"
    if target.startswith("ssh://"):
        return SshTransport(
            SshTarget.parse(target),
            identity=identity,
            known_hosts=known_hosts,
            connect_timeout_s=connect_timeout_s,
            python=python,
        )
    if target.startswith("vast:"):
        if known_hosts is not None:
            raise SshTargetError(
                "--known-hosts does not apply to vast: a freshly rented machine's host key "
                "cannot be known beforehand; it is recorded at first connection and held for "
                "the rental"
            )
        extra = {"lifetime_s": lifetime_s, "orphan_after_s": lifetime_s} if lifetime_s else {}
        return VastTransport(
            target.removeprefix("vast:").strip(),
            identity=identity,
            python=python,
            connect_timeout_s=connect_timeout_s,
            image=vast_image,
            max_price=max_price,
            **extra,
        )
    raise SshTargetError(
        f"--target {target!r}: expected local, ssh://user@host[:port] or vast:<GPU model>"
    )


class _RunCommand(click.Command):
    """Everything after the first `--` is the runner's, even words that look like the suite."""

    def parse_args(self, ctx, args):
        if "--" in args:
            at = args.index("--")
            args, ctx.meta["runner_args"] = args[:at], args[at + 1 :]
        return super().parse_args(ctx, args)


@click.command("run", cls=_RunCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--target",
    help="Where to run: local, ssh://user@host[:port] or vast:<GPU model> (e.g. vast:H200).",
)
@click.option(
    "--cluster",
    metavar="ADDRESS",
    help="Instead of --target: deal whole cases (or a sweep's points, --deal) to the GPU "
    "workers of a Dask cluster, its "
    "scheduler at tcp://host:8786, or `local` / `local:0,1` (one worker per GPU of this host); "
    "one document per GPU model (docs/scale-out.md; needs kernelgap[cluster]).",
)
@click.option(
    "--deal",
    type=click.Choice(["auto", "case", "point"]),
    help="With --cluster: the unit of a task. case: one task per case; point: a swept case is "
    "one task per point (its implementations, and a base and a head, still share one GPU); "
    "auto (the default): per point when a selected case is swept and the cases are fewer than "
    "the GPU workers. One merged document either way.",
)
@click.option(
    "--identity",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="SSH private key (ssh -i).",
)
@click.option(
    "--known-hosts",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The only known_hosts file trusted for ssh targets (default: your ssh's own files).",
)
@click.option(
    "--cases",
    "cases_option",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The suite, as an option (an alias of the SUITE argument, kept for old scripts).",
)
@click.option(
    "--bundle",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A PTX bundle folder (runner build) to ship and time instead of compiling there.",
)
@click.option(
    "--base-bundle",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="With --head-bundle: the bundle of the compiler's base revision. Both are timed in one "
    "run, each candidate X as X@base and X@head in the same rounds; `harness pr` writes the "
    "pull-request comment from the document.",
)
@click.option(
    "--head-bundle",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="With --base-bundle: the bundle of the compiler's head revision (the pull request).",
)
@click.option("--base", "base_ref", metavar="REF", help="With --head and --build-bundle: build "
              "the base bundle here at this revision of --compiler-repo.")  # fmt: skip
@click.option("--head", "head_ref", metavar="REF", help="With --base: the head revision.")
@click.option(
    "--build-bundle",
    metavar="CMD",
    help="With --base/--head: a bash command run in a worktree of each revision that builds the "
    "compiler and writes a bundle to {out} ({src}: the worktree, {ref}, {label}).",
)
@click.option(
    "--compiler-repo",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="The compiler's git checkout, for --base/--head.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("results"),
    show_default=True,
    callback=out_folder,
    help="Folder for result documents (named <UTC start>-<gpu>-<commit>.json).",
)
@click.option(
    "--connect-timeout",
    "connect_timeout_s",
    type=click.FloatRange(min=0, min_open=True),
    default=15.0,
    show_default=True,
    help="Seconds to establish the SSH connection (with --cluster: to reach the scheduler).",
)
@click.option(
    "--job-timeout",
    "job_timeout_s",
    type=click.FloatRange(min=0, min_open=True),
    default=3600.0,
    show_default=True,
    help="Seconds each remote step may run before it is stopped.",
)
@click.option(
    "--python",
    default=None,
    help="Python on the target (with the runner's dependencies, unless --install); default: "
    "this harness's own interpreter for --target local, python3 elsewhere.",
)
@click.option("--check-only", is_flag=True, help="Run `runner check` there instead of bench.")
@click.option(
    "-q",
    "--quiet",
    is_flag=True,
    help="No progress on stderr (the runner's bench or check runs with -q); errors still show.",
)
@click.option(
    "--pytest-gpu",
    is_flag=True,
    help="Run `pytest -m gpu` there first, in the same session (ships tests/).",
)
@click.option(
    "--install/--no-install",
    default=None,
    help="pip install the runner's dependencies there first, into a virtual environment of "
    "kernelgap's own that later runs reuse (default: on for vast only).",
)
@click.option(
    "--venv",
    metavar="FOLDER",
    help="With --install: that environment's folder on the target (default: "
    "~/.cache/kernelgap/venv-pyX.Y there).",
)
@click.option(
    "--max-price",
    type=click.FloatRange(min=0, min_open=True),
    metavar="USD_PER_HOUR",
    help="vast only: the most a rental may cost per hour; offers above it are refused, and "
    "when none is under it the run exits 2 naming the cheapest price seen.",
)
@click.option(
    "--vast-image",
    default=DEFAULT_IMAGE,
    show_default=True,
    help="Docker image for a vast machine (needs python3 and nvcc).",
)
@click.argument(
    "suite", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.pass_context
def run(ctx, target, cluster, identity, known_hosts, suite, cases_option, bundle, base_bundle, head_bundle, **settings):  # fmt: skip
    """Ship SUITE (a cases.toml, default benchmarks/cases.toml; its folder goes with it) to
    --target, run `python -m runner bench` there and save its document under --out.

    Arguments after `--` go to the runner. The remote's progress streams to stderr; the saved
    document's path goes to stdout.

    A suite is code: its command templates run programs and its reference modules are
    imported (by `runner check`, and by the runner on the target) as the user who runs them.
    Run only suites you would run as a build script. Before any target is reached, the
    manifest is checked with the runner's own loader; only regular files inside the suite's
    folder are shipped.

    \b
    Examples:
      python -m harness run benchmarks/cases.toml --target local -- --case axpy_f64
      python -m harness run bench/cases.toml --target ssh://me@gpu-box:2222 --identity ~/.ssh/id
      python -m harness run benchmarks/cases.toml --target vast:"NVIDIA H200" --max-price 4.00 \\
          --bundle bundle/ --pytest-gpu -- --budget-s 1500
      python -m harness run benchmarks/cases.toml --cluster tcp://scheduler:8786 -- --budget-s 1500
    """
    runner_args = ctx.meta.get("runner_args", [])
    quiet = settings.pop("quiet")
    if quiet:
        runner_args = [*runner_args, "-q"]
    if (target is None) == (cluster is None):
        raise RunFailed("give one of --target (one GPU box) and --cluster (a Dask cluster's GPUs)")
    if cluster is not None:
        _refuse_with_cluster(identity, known_hosts, settings)
    elif settings["deal"] is not None:
        raise RunFailed("--deal: only with --cluster (one host's runner deals its own cases)")
    if suite is not None and cases_option is not None and suite != cases_option:
        raise RunFailed(f"give the suite once: SUITE {suite} and --cases {cases_option} differ")
    cases = suite or cases_option or Path("benchmarks/cases.toml")
    if not cases.exists():  # a FIFO or device is named by the manifest's reader
        raise RunFailed(f"{cases}: suite file not found; give the suite (a cases.toml) as SUITE")
    if (base_bundle is None) != (head_bundle is None) or (base_bundle and bundle):
        raise RunFailed(
            "--base-bundle and --head-bundle go together (one bundle per compiler revision), "
            "and not with --bundle"
        )
    revisions = (("base", base_bundle), ("head", head_bundle)) if base_bundle else ()
    refs = {"base": settings.pop("base_ref"), "head": settings.pop("head_ref")}
    build = (settings.pop("build_bundle"), settings.pop("compiler_repo"))
    try:  # --base REF --head REF: both bundles built here first (harness.running.revision_build)
        with (
            revision_build.revision_bundles(refs, *build, bool(revisions or bundle), err) as built,
            Live("harness run", quiet=quiet),  # a status line on a terminal
        ):
            if cluster is not None:
                _cluster(cluster, cases, bundle, built or revisions, runner_args, settings)
            _run(target, identity, known_hosts, cases, bundle, built or revisions, runner_args, settings)  # fmt: skip
    except RevisionBuildError as exc:
        raise RunFailed(str(exc)) from None


def err(text: str) -> None:
    click.echo(text, err=True)


def _run(target, identity, known_hosts, cases, bundle, revisions, runner_args, settings) -> None:
    try:
        plan = shipping.plan(
            cases, bundle=bundle, tests=settings["pytest_gpu"], revisions=revisions
        )
        manifest_check.check_manifest(cases)  # what the target would refuse, refused here
        install = settings["install"]
        install = target.startswith("vast:") if install is None else install
        lifetime_s = (
            (1 + settings["pytest_gpu"]) * settings["job_timeout_s"]
            + (INSTALL_TIMEOUT_S if install else 0.0)
            + RENTAL_GRACE_S
        )
        transport = make_transport(
            target,
            identity=identity,
            known_hosts=known_hosts,
            connect_timeout_s=settings["connect_timeout_s"],
            python=settings["python"],
            vast_image=settings["vast_image"],
            lifetime_s=lifetime_s,
            max_price=settings["max_price"],
        )
    except (ValueError, TransportError) as exc:  # Shipping, ManifestRefused, SshTarget, Vast
        raise RunFailed(str(exc)) from None
    options = {
        **settings,
        "target": target,
        "runner_args": list(runner_args),
        "commit": local_commit(Path(cases).resolve().parent),
        "install": install,
        "python": transport.python,  # --python, else this interpreter (local) or python3
    }
    try:
        with signals_interrupt(), transport:
            status = _steps(Session(transport, plan, options), options)
    except Terminated as exc:  # the session is closed and any rental destroyed by now
        click.echo(f"harness: {exc}; the session on {transport.description} was closed", err=True)
        sys.exit(128 + exc.signum)
    except TransportError as exc:  # could not connect, rent or destroy
        earlier = exc.__context__  # a step's failure that a failing destroy would hide
        also = f"\n(before that: {earlier.message})" if isinstance(earlier, RunFailed) else ""
        raise RunFailed(f"{exc}{also}") from None
    sys.exit(status)


def _refuse_with_cluster(identity, known_hosts, settings) -> None:
    """The options of one SSH or vast target mean nothing to a cluster's workers."""
    given = [
        name
        for name, value in (
            ("--identity", identity),
            ("--known-hosts", known_hosts),
            ("--python", settings["python"]),
            ("--install", settings["install"]),
            ("--venv", settings["venv"]),
            ("--max-price", settings["max_price"]),
            ("--pytest-gpu", settings["pytest_gpu"]),
            ("--check-only", settings["check_only"]),
        )
        if value
    ]
    if given:
        raise RunFailed(
            f"{', '.join(given)}: not with --cluster (its workers bring their own Python with "
            "kernelgap[cluster] installed; docs/scale-out.md)"
        )


def _cluster(address, cases, bundle, revisions, runner_args, settings) -> None:
    """`--cluster`: the suite dealt over a Dask cluster's GPU workers (harness.running.cluster)."""
    try:
        plan = shipping.plan(cases, bundle=bundle, revisions=revisions)
        manifest_check.check_manifest(cases)
        run_settings = {**settings, "commit": local_commit(Path(cases).resolve().parent)}
        with signals_interrupt():  # a local cluster is shut down on the way out
            status = cluster_run.run(address, cases, plan, list(runner_args), run_settings, err)
    except Terminated as exc:
        click.echo(f"harness: {exc}; the cluster run was stopped", err=True)
        sys.exit(128 + exc.signum)
    except ValueError as exc:  # ShippingError, ManifestRefused, ClusterError
        raise RunFailed(str(exc)) from None
    sys.exit(status)


def _steps(session: Session, options: dict) -> int:
    if options["install"]:
        session.install()
    tests_passed = session.pytest_gpu() if options["pytest_gpu"] else True
    status = session.check() if options["check_only"] else session.bench()
    return max(status, 0 if tests_passed else 1)
