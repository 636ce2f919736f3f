"""Every script kept in tools/perf/ answers --help without a GPU: its code path still imports, and
it says what it prints (the figures docs/ and benchmarks/perf/RESULTS.md cite)."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from tests.support.perf_script import run_tool

PERF = ROOT / "tools" / "perf"
# scripts, not the modules fidelity.py and warpforth_dropin.py import
SCRIPTS = sorted(p for p in PERF.glob("*.py") if 'if __name__ == "__main__"' in p.read_text())


def test_there_are_scripts_to_run():
    assert len(SCRIPTS) >= 20


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help_exits_0_and_says_what_it_measures(script):
    done = run_tool(script, "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    said = done.stdout + done.stderr
    assert len(said.split()) >= 5, said
