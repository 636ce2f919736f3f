"""pytest integration of runner.bench, registered by the package (entry point `pytest11`).

    @pytest.mark.parametrize("case", bench.cases(W), ids=lambda c: c.id)
    def test_my_op(case):
        bench.Runner(my_op, case).compare({"torch.matmul": torch.matmul})

Options: --bench-verify (correctness checks only, nothing timed), --bench-output FILE (the
result document at the end of the session), --bench-report FILE (the markdown report),
--bench-mode hot|cold, --bench-timer events|cupti, --bench-budget SECONDS, --bench-recheck
(every timed sample on fresh inputs, its outputs verified; by default only where that is
cheap, else spot samples) and --bench-no-recheck. A case's data is released after each test.
`bench.params(W)` marks each row `smoke` or `full`, so `-m smoke` runs the small rows.
"""

from __future__ import annotations

import sys

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("kernelgap", "kernelgap: compare callables (runner.bench)")
    group.addoption(
        "--bench-verify",
        action="store_true",
        help="run only the correctness checks of bench.Runner.compare(); time nothing",
    )
    group.addoption(
        "--bench-output", metavar="FILE", help="write the result document (JSON) here at the end"
    )
    group.addoption(
        "--bench-report", metavar="FILE", help="write the markdown report here at the end"
    )
    group.addoption("--bench-mode", choices=("cold", "hot"), help="timing mode (default cold)")
    group.addoption(
        "--bench-timer",
        choices=("auto", "events", "cupti"),
        help="auto (default): cupti in cold mode (refused without cupti-python), events in hot "
        "mode; events: CUDA events around each sample (in cold mode: warned about and recorded); "
        "cupti: the span of the kernels' CUPTI activity records (first start to last end)",
    )
    group.addoption(
        "--bench-recheck",
        action="store_true",
        help="give every timed sample fresh inputs from a new seed and verify its outputs "
        "(outside the timing), catching results cached by pointer or left in an output buffer; "
        "by default (recheck auto) every sample where that is cheap, else spot samples",
    )
    group.addoption(
        "--bench-no-recheck",
        action="store_true",
        help="never recheck timed samples (see --bench-recheck)",
    )
    group.addoption(
        "--bench-budget",
        type=float,
        metavar="SECONDS",
        help="timed wall time per comparison (default 1)",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "smoke: a small row of a bench workload (bench.params)")
    config.addinivalue_line("markers", "full: a full-size row of a bench workload (bench.params)")
    opts = config.option
    if not (
        opts.bench_verify
        or opts.bench_output
        or opts.bench_report
        or opts.bench_mode
        or opts.bench_budget is not None
        or opts.bench_timer
        or opts.bench_recheck
        or opts.bench_no_recheck
    ):
        return  # not a benchmark session: leave the current session alone
    from runner.bench import session

    s = session.reset(session.Session(name="python-api", root=str(config.rootpath)))
    recheck = True if opts.bench_recheck else False if opts.bench_no_recheck else "auto"
    changes = {"verify_only": bool(opts.bench_verify), "recheck": recheck}
    if opts.bench_mode:
        changes["mode"] = opts.bench_mode
    if opts.bench_budget is not None:
        changes["budget_s"] = opts.bench_budget  # TimingOptions refuses 0 and negatives
    if opts.bench_timer:
        changes["timer"] = opts.bench_timer
    s.configure(**changes)
    config._kernelgap_session = s


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return
    from runner.bench.workload import Case

    for value in callspec.params.values():
        if isinstance(value, Case):
            value.release()


def pytest_sessionfinish(session, exitstatus):
    s = getattr(session.config, "_kernelgap_session", None)
    if s is None:
        return
    opts = session.config.option
    try:
        if s.cases and (opts.bench_output or opts.bench_report):
            s.write(opts.bench_output, opts.bench_report)
            for path in (opts.bench_output, opts.bench_report):
                if path:
                    print(f"kernelgap: wrote {path} ({len(s.cases)} comparisons)", file=sys.stderr)
        elif opts.bench_output or opts.bench_report:
            print("kernelgap: no comparison ran; nothing written", file=sys.stderr)
    finally:
        s.close()
