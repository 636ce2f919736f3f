"""tools/perf/launch_startup.py: the overlap marks of a `--no-service` launch, read here where
the launch ends at the no-GPU error (the marks come before the driver is asked anything)."""

from __future__ import annotations

from tests.support.perf_script import load

launch_startup = load("launch_startup")


def test_the_early_start_begins_before_the_main_thread_reaches_the_driver(tmp_path, capsys):
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    ptx = tmp_path / "add1.ptx"
    ptx.write_text(launch_startup.PTX)
    launch_startup.measure_overlap(1, launch_startup._env(str(runtime)), ptx)
    rows = {}
    for line in capsys.readouterr().out.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0]] = float(cells[1])
    begun, reached = (
        rows["spawn to early driver start begun"],
        rows["spawn to main thread at the driver"],
    )
    assert 0 < begun < reached <= rows["spawn to exit (wall, marked)"]
