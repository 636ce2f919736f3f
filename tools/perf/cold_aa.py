"""Cold A/A by CUPTI under variations: what makes two loads of the same PTX differ cold.

    python tools/perf/cold_aa.py      (on a GPU box with nvcc, torch and cupti-python)

The engine's `measure` on fidelity.py's axpy at 2^10 and 2^18, 1500 cold samples a side, each
line with fresh modules: the runner's loads a side (runner.execution.case.COLD_LOADS, split
between the sides as it splits them: fidelity.side_loads) or one,
after a hot run on the same modules or not, the two names in either order. Then runner.bench's
torch.add at 2^10, cold by CUPTI, for two budgets: the samples a side it gets.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from protocol import statistics

sys.path.insert(0, str(Path(__file__).parent))

import fidelity  # tools/perf, on the path above
import fidelity_torch


def ptx_line(ptx: str, label: str, loads=None, hot_first=False, order=("A", "A'"), log2n=10):
    from runner.execution.case import COLD_LOADS
    from runner.measurement.timing import TimingSettings, cupti, measure
    from runner.measurement.timing.cuda import CudaBackend

    samples = 1500
    loads = COLD_LOADS if loads is None else loads
    axpy = fidelity.Axpy(ptx, 1 << log2n, modules=2 * loads)
    items = {"A": axpy.items[0], "A'": axpy.items[1]}
    if hot_first:
        b = CudaBackend(axpy.stream, axpy.internal, items, axpy.resets, 1000)
        measure(b, ["A", "A'"], TimingSettings(mode="hot", samples=30, target_sample_s=0.02))
        b.close()
    window = cupti.ActivityWindow(int(axpy.ctx.handle), int(axpy.stream.handle))
    cold_items = fidelity.side_loads(axpy.items) if loads > 1 else None
    b = CudaBackend(
        axpy.stream, axpy.internal, items, axpy.resets, 1000, window=window, cold_items=cold_items
    )
    t = time.perf_counter()
    settings = TimingSettings(mode="cold", samples=samples, max_samples=samples, timer="cupti")
    m = measure(b, list(order), settings)
    g = statistics.gap(m.impls["A"].samples_s, m.impls["A'"].samples_s)
    a = sorted(m.impls["A"].samples_s)
    print(
        f"{label:38s} 2^{log2n} {a[len(a) // 2] * 1e6:.3f} us batch {m.impls['A'].batch} "
        f"{time.perf_counter() - t:.1f} s  A'/A {g['ratio_of_medians']:.4f} "
        f"[{g['ci_low']:.4f}, {g['ci_high']:.4f}]",
        flush=True,
    )
    b.close()
    window.close()
    axpy.close()


def torch_lines() -> None:
    import torch

    from runner import bench

    add, again = fidelity_torch.add_workload([10], label="cold-aa-add")

    for budget in (2.0, 8.0):
        opts = bench.TimingOptions(mode="cold", timer="cupti", budget_s=budget, max_samples=4000)
        (case,) = bench.cases(add)
        t = time.perf_counter()
        session = bench.Session(options=opts)
        c = bench.Runner(torch.add, case, options=opts, session=session).compare({"again": again})
        e = c.document_case["implementations"]["again"]
        gap, window = e["gap"], e["integrity"]["window"]
        print(
            f"torch 2^10 cold cupti budget {budget}: {c.rows['add'].median_s * 1e6:.3f} us, "
            f"{c.rows['add'].samples} samples/side, batch {e['timing']['batch']}, wall "
            f"{time.perf_counter() - t:.1f} s, A/A {gap['ratio_of_medians']:.4f} "
            f"[{gap['ci_low']:.4f}, {gap['ci_high']:.4f}], windows {window.get('windows')} "
            f"findings {len(window.get('findings'))}",
            flush=True,
        )


def main() -> None:
    if {"-h", "--help"} & set(sys.argv[1:]):
        print(__doc__)
        return
    ptx = fidelity.device_ptx()
    ptx_line(ptx, "runner's loads, fresh")
    ptx_line(ptx, "runner's loads, after hot", hot_first=True)
    ptx_line(ptx, "runner's loads, order A' A", order=("A'", "A"))
    ptx_line(ptx, "1 load a side, fresh", loads=1)
    ptx_line(ptx, "1 load a side, after hot", loads=1, hot_first=True)
    ptx_line(ptx, "runner's loads, fresh, 2^18", log2n=18)
    ptx_line(ptx, "1 load a side, fresh, 2^18", loads=1, log2n=18)
    torch_lines()


if __name__ == "__main__":
    main()
