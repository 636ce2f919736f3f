"""Print the per-case gap table of a result document (markdown), primary candidate first.

    python tools/perf/gap_table.py results/RESULT.json [--baseline cuda]

Columns: the baseline's median time, each candidate's median time and gap with its 95% interval,
noise (MAD / median) of every implementation, and throughput as a fraction of the device's peak
(bandwidth or FLOP rate, whichever the case declares; the larger of the two). Last, the
geometric-mean gap of each candidate over the cases where it is stable.
"""

from __future__ import annotations

import argparse
import json
import math
import sys


def peak_fraction(impl: dict) -> str:
    t = impl.get("throughput") or {}
    fractions = [t[k] for k in ("fraction_of_peak_bandwidth", "fraction_of_peak_flops") if k in t]
    return f"{max(fractions):.0%}" if fractions else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result")
    args = parser.parse_args()
    with open(args.result, "rb") as f:
        doc = json.load(f)
    names: list[str] = []
    for case in doc["cases"]:
        for name, impl in case["implementations"].items():
            if impl["role"] == "candidate" and name not in names:
                names.append(name)
    primary = doc["suite"].get("primary")
    if primary in names:
        names.remove(primary)
        names.insert(0, primary)
    head = ["case", "baseline median"]
    for n in names:
        head += [f"{n} median", f"{n} gap [95% CI]"]
    head += [
        "noise (" + ", ".join(["base", *names]) + ")",
        "of peak (" + ", ".join(["base", *names]) + ")",
    ]
    rows = [head, ["---"] * len(head)]
    logs: dict[str, list[float]] = {n: [] for n in names}
    for case in doc["cases"]:
        impls = case["implementations"]
        base = impls[case["baseline"]]
        if case["status"] != "ok":
            rows.append(
                [case["id"], f"{case['status']}: {case.get('error', {}).get('message', '')[:60]}"]
            )
            continue
        row = [case["id"], f"{base['timing']['stats']['median_s'] * 1e6:.2f} us"]
        noise, peak = [f"{base['timing']['stats']['noise']:.2%}"], [peak_fraction(base)]
        for n in names:
            impl = impls.get(n)
            if impl is None or "timing" not in impl:
                row += ["-", "-"]
                noise.append("-")
                peak.append("-")
                continue
            stats, gap = impl["timing"]["stats"], impl.get("gap")
            row.append(f"{stats['median_s'] * 1e6:.2f} us")
            if gap:
                mark = "" if gap["stable"] else " (unstable)"
                row.append(
                    f"{gap['ratio_of_medians']:.3f}x [{gap['ci_low']:.3f}, {gap['ci_high']:.3f}]{mark}"
                )
                if gap["stable"]:
                    logs[n].append(math.log(gap["ratio_of_medians"]))
            else:
                row.append("-")
            noise.append(f"{stats['noise']:.2%}")
            peak.append(peak_fraction(impl))
        rows.append([*row, " / ".join(noise), " / ".join(peak)])
    out = sys.stdout
    for r in rows:
        out.write("| " + " | ".join(r) + " |\n")
    out.write("\n| candidate | geomean gap | stable cases |\n| --- | --- | --- |\n")
    for n in names:
        v = f"{math.exp(sum(logs[n]) / len(logs[n])):.3f}x" if logs[n] else "-"
        out.write(f"| {n} | {v} | {len(logs[n])} |\n")


if __name__ == "__main__":
    main()
