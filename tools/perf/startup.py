"""Runner start-up on a GPU box: import to a ready context, in fresh interpreters.

    python tools/perf/startup.py [--repeats 7]

Each step runs in a new Python process; "inside" is measured in the process from its first
statement (so the interpreter's own start is left out), "wall" includes it. The issue's target
is import to a ready context <= 1 s (the runner's bench worker and the one-shot launcher).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

TARGET_S = 1.0
_TIMED = "import time; t = time.perf_counter()\n{body}\nprint(time.perf_counter() - t)"
STEPS = {
    "import numpy": "import numpy",
    "import cuda.bindings.driver": "from cuda.bindings import driver",
    "cuInit + primary context": (
        "from cuda.bindings import driver as d\nd.cuInit(0)\n_, dev = d.cuDeviceGet(0)\n"
        "_, c = d.cuDevicePrimaryCtxRetain(dev)\nd.cuCtxSetCurrent(c)"
    ),
    "bench worker: import + ready context": (
        "import runner.execution.isolation\nfrom runner.gpu import driver\ndriver.Context(0)"
    ),
    "one-shot launcher: import + ready context": (
        "import runner.launch.oneshot\nfrom runner.gpu import driver\ndriver.Context(0)"
    ),
    "runner.bench: import + ready device": (
        "import runner.bench\nfrom runner.bench.cuda_device import CudaDevice\nCudaDevice(0)"
    ),
}
CHECKED = ("bench worker: import + ready context", "one-shot launcher: import + ready context")


def run_step(body: str) -> tuple[float, float]:
    """(inside seconds, wall seconds) of `body` in a fresh interpreter."""
    import time

    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _TIMED.format(body=body)], capture_output=True, text=True
    )
    wall = time.perf_counter() - t
    if out.returncode != 0:
        raise SystemExit(f"startup: step failed:\n{body}\n{out.stderr.strip()[-2000:]}")
    return float(out.stdout.strip().splitlines()[-1]), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print("| step (fresh process) | inside, median (ms) | inside, max (ms) | wall, median (ms) |")
    print("| --- | --- | --- | --- |")
    verdicts = []
    for name, body in STEPS.items():
        runs = [run_step(body) for _ in range(args.repeats)]
        inside = [r[0] for r in runs]
        wall = [r[1] for r in runs]
        med = statistics.median(inside)
        print(
            f"| {name} | {med * 1e3:.0f} | {max(inside) * 1e3:.0f} | "
            f"{statistics.median(wall) * 1e3:.0f} |"
        )
        if name in CHECKED:
            verdicts.append(f"{name}: {med:.3f} s ({'met' if med <= TARGET_S else 'MISSED'})")
    print(f"\ntarget: import to a ready context <= {TARGET_S:.0f} s: " + "; ".join(verdicts))


if __name__ == "__main__":
    main()
