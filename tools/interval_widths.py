"""On a GPU box: run the suite hot and cold and print what a team acts on, per case: the gaps'
interval half-widths (median and worst over the candidates and over the cases), the A/A
control (its gap, interval, whether it holds 1.0, its term) and where the sequential rule
stopped. Run it on one card before and after a change to the statistics and compare.

    python tools/interval_widths.py [--cases benchmarks/cases.toml] [--out results/widths]
        [--bundle DIR] [--tree DIR] [--every-point] [--documents hot.json cold.json]

The headline suite (every case once, a swept one at its headline point) unless --every-point;
--tree runs another checkout's runner (a `git worktree` of the revision before a change).

With --documents it reads result documents already written instead of running the suite.
stdout: the markdown tables; progress and the runner's stderr on stderr.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def headline_selectors(cases: Path) -> tuple[str, ...]:
    sys.path.insert(0, str(ROOT))
    from runner.definition import manifest

    return manifest.load(cases).headline_selectors()


def run_suite(args: argparse.Namespace, mode: str, selectors: tuple[str, ...]) -> Path:
    """`runner bench` over the suite in `mode` with the runner of `args.tree`, only the cases
    `selectors` name (all where empty); the document's path (kept on failure too)."""
    args.out.mkdir(parents=True, exist_ok=True)
    document = args.out / f"{mode}.json"
    command = [sys.executable, "-m", "runner", "bench", str(args.cases.resolve()), "--mode", mode]
    command += [a for s in selectors for a in ("--case", s)]
    command += ["-o", str(document.resolve())]
    command += ["--bundle", str(args.bundle.resolve())] if args.bundle else []
    print(f"interval_widths: {' '.join(command)} (in {args.tree})", file=sys.stderr)
    subprocess.run(command, cwd=args.tree, check=False)
    return document


def half_width(gap: dict) -> float:
    """A gap's relative half-width: (ci_high - ci_low) / 2 / ratio."""
    return (gap["ci_high"] - gap["ci_low"]) / 2 / gap["ratio_of_medians"]


def case_rows(document: dict) -> list[dict]:
    """Per case: its candidates' widest and median half-widths, its control and its stop."""
    rows = []
    for case in document.get("cases", []):
        gaps = [
            impl["gap"]
            for impl in case.get("implementations", {}).values()
            if impl.get("role") != "baseline" and impl.get("gap")
        ]
        widths = [half_width(g) for g in gaps]
        aa = case.get("aa_control") or {}
        seq = case.get("sequential") or {}
        rows.append(
            {
                "case": case.get("id", "?"),
                "status": case.get("status"),
                "median": statistics.median(widths) if widths else None,
                "worst": max(widths) if widths else None,
                "aa": aa,
                "stop": f"{seq.get('stopped_by', '-')} at {seq.get('samples', '-')}",
                "source": next((g.get("systematic_source") for g in gaps), None),
            }
        )
    return rows


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.3%}"


def table(mode: str, rows: list[dict]) -> str:
    lines = [
        f"### {mode}",
        "",
        "| case | status | half-width median | worst | A/A control [interval] | holds 1 | "
        "term | stop | term from |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        aa = r["aa"]
        control = (
            f"x{aa['ratio_of_medians']:.4f} [{aa['ci_low']:.4f}, {aa['ci_high']:.4f}]"
            if aa
            else "-"
        )
        holds = "-" if not aa else "yes" if aa["ci_low"] <= 1.0 <= aa["ci_high"] else "**no**"
        lines.append(
            f"| {r['case']} | {r['status']} | {percent(r['median'])} | {percent(r['worst'])} | "
            f"{control} | {holds} | {percent(aa.get('systematic'))} | {r['stop']} | "
            f"{r['source'] or '-'} |"
        )
    widths = [r["median"] for r in rows if r["median"] is not None]
    worst = [r["worst"] for r in rows if r["worst"] is not None]
    held = [r for r in rows if r["aa"]]
    apart = sum(not (r["aa"]["ci_low"] <= 1.0 <= r["aa"]["ci_high"]) for r in held)
    stops: dict[str, int] = {}
    for r in rows:
        key = r["stop"].split(" at ")[0]
        stops[key] = stops.get(key, 0) + 1
    lines += [
        "",
        f"Over {len(rows)} cases: median half-width {percent(statistics.median(widths)) if widths else '-'}, "
        f"worst {percent(max(worst)) if worst else '-'}; A/A controls holding 1.0: "
        f"{len(held) - apart} of {len(held)}; stops: "
        + ", ".join(f"{k} {v}" for k, v in sorted(stops.items())),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=Path, default=ROOT / "benchmarks" / "cases.toml")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "widths")
    parser.add_argument("--bundle", type=Path, default=None)
    parser.add_argument("--documents", nargs="*", type=Path, help="hot and cold documents")
    parser.add_argument("--tree", type=Path, default=ROOT, help="run that checkout's runner")
    parser.add_argument("--every-point", action="store_true", help="every point of a sweep")
    args = parser.parse_args(argv)
    if args.documents:
        documents = {path.stem: path for path in args.documents}
    else:
        selectors = () if args.every_point else headline_selectors(args.cases)
        documents = {m: run_suite(args, m, selectors) for m in ("hot", "cold")}
    for mode, path in documents.items():
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"interval_widths: {path}: no result document ({exc})", file=sys.stderr)
            return 1
        print(table(mode, case_rows(document)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
