"""tools/perf/ingest_profile.py: the profile of a small bulk ingest, writer and worker."""

from __future__ import annotations

import subprocess
import sys

from tests.support.perf_script import ROOT, load

load("ingest_profile")  # skips where the tree has no tools/


def test_it_profiles_the_writer_and_a_worker_of_a_small_bulk_ingest():
    script = ROOT / "tools" / "perf" / "ingest_profile.py"
    done = subprocess.run(
        [sys.executable, str(script), "--files", "20", "--worker-files", "3", "--top", "5"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "## main: 20 files" in done.stdout and "## worker: 3 files" in done.stdout
    assert "20 of 20 runs stored" in done.stderr  # the writer's reports, not in the document
    assert done.stdout.count("Ordered by: internal time") == 2
