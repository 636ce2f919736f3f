"""fidelity.py's Nsight Compute reading: gpu__time_duration of the kernels a target process
launches, the card's clocks left alone (see fidelity.py)."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
from pathlib import Path


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def ncu_us(target: list[str], kernel_regex: str, cache: str) -> float | None:
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    if not Path(ncu).exists():
        return None
    command = [
        ncu,
        "--csv",
        "--print-units",
        "base",
        "--metrics",
        "gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second",
        "--cache-control",
        cache,
        "--clock-control",
        "none",
        "-k",
        f"regex:{kernel_regex}",
        *target,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    from runner.explain import profiling as ncu_parse

    found: dict[str, list[float]] = {}
    for r in ncu_parse.rows(done.stdout):
        value = ncu_parse.number(r["Metric Value"])
        if value is not None:
            found.setdefault(r["Metric Name"], []).append(value)
    values = found.get("gpu__time_duration.sum")
    if not values:
        say(f"ncu gave no figure: {done.stdout[-400:]} {done.stderr[-400:]}")
        return None
    # the SM clock of each profiled launch (the card's own: --clock-control none), to stderr:
    # an isolated launch can run below the clock of back-to-back ones
    hz = found.get("sm__cycles_elapsed.avg.per_second", [])
    say(
        f"ncu {kernel_regex} (cache {cache}): {' '.join(f'{v / 1e3:.2f}' for v in values)} us at "
        f"{' '.join(f'{v / 1e6:.0f}' for v in hz) or '?'} MHz"
    )
    return statistics.median(values) / 1e3  # ns -> us
