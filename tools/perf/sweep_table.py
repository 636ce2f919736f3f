"""Gap by size from a swept suite's result document: a table per swept case, a column per candidate.

    python tools/perf/sweep_table.py RESULT.json [RESULT.json ...]

For each document: the run's wall time (started to finished) and its points (ok, failed,
skipped), then per swept case a markdown table of the baseline's median time and each
candidate's gap at every point (the headline marked), and each candidate's curve in a line
(harness.reporting.sweep_table, which `harness summary` uses too). The tables go to stdout, for
benchmarks/perf/RESULTS.md; a document that cannot be read is named on stderr (exit 2).
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness.reporting.sweep_table import render, sweep_tables  # noqa: E402
from harness.reporting.table import MARKDOWN  # noqa: E402
from protocol.validation import load_result  # noqa: E402


def _wall_s(document: dict) -> float | None:
    start, end = document.get("started_utc"), document.get("finished_utc")
    if not (start and end):
        return None
    parse = lambda t: datetime.fromisoformat(t.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


def report(path: Path) -> str:
    document = load_result(path.read_bytes(), str(path))
    wall = _wall_s(document)
    mode = (document.get("options") or {}).get("mode")
    counts = document["summary"].get("points")
    head = f"## {path.name}: {document['environment']['device']['name']}, mode {mode}"
    lines = [head, ""]
    if wall is not None:
        lines.append(f"Run wall time: {wall:.0f} s ({wall / 60:.1f} min).")
    if counts:
        lines.append(
            f"{counts['cases']} swept case(s), {counts['points']} points: {counts['ok']} ok, "
            f"{counts['failed']} failed, {counts['skipped']} skipped."
        )
    for table in sweep_tables(document):
        lines += ["", f"### {table.case_id} v{table.version}", "", render(table, MARKDOWN)]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    for name in argv:
        try:
            sys.stdout.write(report(Path(name)))
        except (OSError, ValueError) as exc:
            print(f"sweep_table.py: {name}: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
