"""Two runs of one suite on two cards (two fresh GPU boxes): what each card says and how far
apart they are.

    python tools/perf/two_boxes.py A.json B.json

Prints, as markdown on stdout: per case and candidate, the gap with its card-scoped interval on
each card (what one run can see) and B / A with the interval widened by the between-card term
(harness.history.cards.widen: does it hold 1.0?); the in-run A/A control of every case on each
card (its gap and the systematic term it set); the between-card term, cards.estimate over the two
documents (two cards: one degree of freedom, reported raw, and the estimate the history would
use, which is the documented default until MIN_CARDS cards); and each candidate's geomean with
its interval on each card. Bad input (not a result document, two suites) exits 2 naming the
file and the field.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import orjson

from harness.history import cards
from protocol.errors import DocumentError
from protocol.headline import log_standard_error
from protocol.validation import validate

Z95 = 1.959964


def load(path: Path) -> dict:
    try:
        doc = orjson.loads(path.read_bytes())
        validate(doc, "result", str(path))
    except (OSError, orjson.JSONDecodeError, DocumentError) as exc:
        raise SystemExit(f"error: {path}: {exc}") from None
    return doc


def same_suite(a: dict, b: dict, paths: list[Path]) -> None:
    """Refuse two documents of different suites (suite.name and suite.version)."""
    for field in ("name", "version"):
        if a["suite"].get(field) != b["suite"].get(field):
            raise SystemExit(
                f"error: {paths[1]}: suite.{field} is {b['suite'].get(field)!r}, "
                f"{paths[0]} has {a['suite'].get(field)!r}: two runs of one suite are compared"
            )


def interval(gap: dict | None) -> str:
    if not gap:
        return "-"
    return f"x{gap['ratio_of_medians']:.4f} [{gap['ci_low']:.4f}, {gap['ci_high']:.4f}]"


def gaps_of(doc: dict) -> dict[tuple[str, str], tuple[dict, dict]]:
    """{(case id, candidate): (its gap block, its case)} of the ok cases."""
    out = {}
    for case in doc["cases"]:
        for name, impl in case.get("implementations", {}).items():
            if impl.get("role") != "baseline" and impl.get("gap"):
                out[(case["id"], name)] = (impl["gap"], case)
    return out


def across(a: dict, b: dict, sd: float) -> tuple[float, float, float]:
    """B / A of two gaps and its 95% interval: each card's interval (log standard errors in
    quadrature), widened by the between-card term `sd` (cards.widen)."""
    ratio = b["ratio_of_medians"] / a["ratio_of_medians"]
    se = math.hypot(log_standard_error(a), log_standard_error(b))
    low, high = ratio * math.exp(-Z95 * se), ratio * math.exp(Z95 * se)
    return (ratio, *cards.widen(ratio, low, high, sd))


def between(docs: list[dict]) -> tuple[cards.BetweenCards, cards.BetweenCards]:
    """(cards.estimate over the two documents' gaps, raw; the estimate as the history makes it)."""
    points = [
        (f"{cid}/{name}", cards.card_of(doc, case), gap)
        for doc in docs
        for (cid, name), (gap, case) in gaps_of(doc).items()
    ]
    return cards.estimate(points, min_cards=2), cards.estimate(points)


def gap_table(docs: list[dict], sd: float) -> list[str]:
    lines = [
        "| case | candidate | card A | card B | B / A (between-card term) | holds 1.0 |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    a_gaps, b_gaps = gaps_of(docs[0]), gaps_of(docs[1])
    for key in [*a_gaps, *(k for k in b_gaps if k not in a_gaps)]:
        a, b = (a_gaps.get(key) or (None,))[0], (b_gaps.get(key) or (None,))[0]
        cross, holds = "-", "-"
        if a and b:
            ratio, low, high = across(a, b, sd)
            cross = f"x{ratio:.4f} [{low:.4f}, {high:.4f}]"
            holds = "yes" if low <= 1.0 <= high else "no"
        lines.append(f"| {key[0]} | {key[1]} | {interval(a)} | {interval(b)} | {cross} | {holds} |")
    return lines


def control_table(docs: list[dict]) -> list[str]:
    lines = ["| case | A/A control A (term) | A/A control B (term) |", "| --- | --- | --- |"]
    by_case: dict[str, list[str]] = {}
    for i, doc in enumerate(docs):
        for case in doc["cases"]:
            aa = case.get("aa_control")
            cell = f"{interval(aa)} ({aa['systematic']:.3%})" if aa else "none"
            by_case.setdefault(case["id"], ["-", "-"])[i] = cell
    lines += [f"| {cid} | {a} | {b} |" for cid, (a, b) in by_case.items()]
    return lines


def geomean_table(docs: list[dict]) -> list[str]:
    lines = ["| candidate | card A | card B |", "| --- | --- | --- |"]
    heads = [doc["summary"].get("geomean_gap") or {} for doc in docs]
    for name in dict.fromkeys([*heads[0], *heads[1]]):
        cells = []
        for head in heads:
            h = head.get(name)
            cells.append(
                f"x{h['value']:.4f} [{h['ci_low']:.4f}, {h['ci_high']:.4f}] over "
                f"{h['cases']} of {h['of']}"
                if h
                else "-"
            )
        lines.append(f"| {name} | {cells[0]} | {cells[1]} |")
    return lines


def report(paths: list[Path]) -> str:
    docs = [load(p) for p in paths]
    same_suite(*docs, paths)
    raw, used = between(docs)
    uuids = [cards.card_of(doc) or "unknown" for doc in docs]
    lines = [f"# {docs[0]['suite']['name']} on two cards", ""]
    lines += [f"- card A: {uuids[0]} ({paths[0].name})", f"- card B: {uuids[1]} ({paths[1].name})"]
    if cards.same_card(*docs):
        lines.append("- WARNING: both documents ran on one card: this is not two boxes")
    lines += [
        f"- between-card term (SD of ln gap): {raw.sd:.3%} from these two ({raw.cards} cards, "
        f"{raw.series} series, cards.estimate raw); the history would use {used.sd:.3%} "
        f"({used.source}; "
        f"documented default {cards.DEFAULT_BETWEEN_CARD_SD:.3%} until {cards.MIN_CARDS} cards)",
        "",
        f"## Gaps (B / A widened by the term in use, {used.sd:.3%})",
        "",
        *gap_table(docs, used.sd),
        "",
        "## In-run A/A control",
        "",
        *control_table(docs),
        "",
        "## Geomean",
        "",
        *geomean_table(docs),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if len(args) != 2:
        print("usage: python tools/perf/two_boxes.py A.json B.json", file=sys.stderr)
        return 2
    try:
        sys.stdout.write(report([Path(a) for a in args]))
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
