"""fidelity.py's tables and its targets, met or missed (see fidelity.py)."""

from __future__ import annotations


def within(value: float, reference: float, rel: float, abs_us: float) -> bool:
    return abs(value - reference) <= max(rel * reference, abs_us)


def _aa_ok(triple) -> bool:
    ratio, lo, hi = triple
    return abs(ratio - 1) <= 0.002 and lo <= 1.0 <= hi


def _aa(triple) -> str:
    r, lo, hi = triple
    return f"{r:.4f} [{lo:.4f}, {hi:.4f}]{'' if _aa_ok(triple) else ' (!)'}"


def _misses(side: str, k: int, row: dict, reference: float | None, ncu_cold: float | None):
    """The cold and A/A targets a row misses: cold within max(3%, 0.2 us) of the independent
    CUPTI reading and never above ncu's cold figure by more than max(3%, 0.3 us)."""
    cold = row["cold_cupti_us"]
    if reference and not within(cold, reference, 0.03, 0.2):
        yield f"{side} 2^{k}: cold {cold:.2f} us vs CUPTI reference {reference:.2f} us"
    if ncu_cold and cold > ncu_cold + max(0.03 * ncu_cold, 0.3):
        yield f"{side} 2^{k}: cold {cold:.2f} us above ncu {ncu_cold:.2f} us"
    for key in ("cold_cupti_aa", "hot_events_aa"):
        if not _aa_ok(row[key]):
            yield f"{side} 2^{k}: A/A {key[:-3]} {_aa(row[key])}"


def report(ptx_rows, ptx_ncu, ptx_prof, torch_rows, torch_ncu) -> list[str]:
    """The tables of the parts that ran (--only), then the targets met or missed."""
    lines, misses = _ptx_table(ptx_rows, ptx_ncu, ptx_prof) if ptx_rows else ([], [])
    if torch_rows:
        table, missed = _torch_table(torch_rows, torch_ncu)
        lines, misses = [*lines, *table], [*misses, *missed]
    lines += ["(!) marks an A/A outside |gap - 1| <= 0.2% or an interval without 1.0.", ""]
    lines.append("targets: " + ("all met" if not misses else "MISSED: " + "; ".join(misses)))
    return lines


def _ptx_table(ptx_rows, ptx_ncu, ptx_prof) -> tuple[list[str], list[str]]:
    lines = ["## PTX runner: axpy_f64 (per launch, us)", ""]
    lines.append(
        "| n | ncu cold | profiler cold | runner cold cupti | runner cold events | A/A cold cupti "
        "| ncu hot | profiler hot | runner hot events | runner hot cupti | A/A hot events |"
    )
    lines.append("|" + " --- |" * 11)
    misses = []
    for r in ptx_rows:
        k = r["log2n"]
        nc, nh = ptx_ncu.get(k, (None, None))
        prof = ptx_prof.get(str(k)) or ptx_prof.get(k) or {}
        if not isinstance(prof, dict):  # a --raw file of before the hot reading: cold alone
            prof = {"cold": prof}
        prof_cold, prof_hot = prof.get("cold"), prof.get("hot")
        cells = [
            f"2^{k}",
            f"{nc:.2f}" if nc else "-",
            f"{prof_cold:.2f}" if prof_cold else "-",
            f"{r['cold_cupti_us']:.2f}",
            f"{r['cold_events_us']:.2f}",
            _aa(r["cold_cupti_aa"]),
            f"{nh:.2f}" if nh else "-",
            f"{prof_hot:.2f}" if prof_hot else "-",
            f"{r['hot_events_us']:.2f}",
            f"{r['hot_cupti_us']:.2f}",
            _aa(r["hot_events_aa"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
        misses += _misses("PTX", k, r, prof_cold, nc)
        if nh and not within(r["hot_events_us"], nh, 0.03, 1.0):
            misses.append(f"PTX 2^{k}: hot {r['hot_events_us']:.2f} us vs ncu {nh:.2f} us")
    return [*lines, ""], misses


def _torch_table(torch_rows, torch_ncu) -> tuple[list[str], list[str]]:
    lines, misses = ["## runner.bench: torch.add float32 (per call, us)", ""], []
    lines.append(
        "| n | ncu cold | profiler cold | bench cold cupti | bench cold events | A/A cold cupti "
        "| bench hot | A/A hot | do_bench | do_bench_cudagraph |"
    )
    lines.append("|" + " --- |" * 10)
    for r in torch_rows:
        k = r["log2n"]
        nc = torch_ncu.get(k)
        cells = [
            f"2^{k}",
            f"{nc:.2f}" if nc else "-",
            f"{r['profiler_us']:.2f}",
            f"{r['cold_cupti_us']:.2f}",
            f"{r['cold_events_us']:.2f}",
            _aa(r["cold_cupti_aa"]),
            f"{r['hot_events_us']:.2f}",
            _aa(r["hot_events_aa"]),
            f"{r['do_bench_us']:.2f}",
            f"{r['do_bench_cudagraph_us']:.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
        misses += _misses("torch", k, r, r["profiler_us"], nc)
    return [*lines, ""], misses
