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
        "gpu__time_duration.sum",
        "--cache-control",
        cache,
        "--clock-control",
        "none",
        "-k",
        f"regex:{kernel_regex}",
        *target,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    from runner.explain import ncu as ncu_parse

    values = [
        ncu_parse.number(r["Metric Value"])
        for r in ncu_parse.rows(done.stdout)
        if r["Metric Name"] == "gpu__time_duration.sum"
    ]
    values = [v for v in values if v is not None]
    if not values:
        say(f"ncu gave no figure: {done.stdout[-400:]} {done.stderr[-400:]}")
        return None
    return statistics.median(values) / 1e3  # ns -> us
