"""The dashboard's explain/ pages: for each case of the newest run, `harness explain` as markdown
(explain/<stem>.md, to paste into an issue or a pull request) and as a page that opens from disk
(explain/<stem>.html, the report as HTML by harness.dashboard.report_html: no network); <stem>
is file_stem(case id), a readable prefix and a hash of the id. The table
of the newest gaps links each case to its page. Pages of cases the newest run lacks are removed,
so explain/ always describes the run the table shows."""

from __future__ import annotations

import hashlib
import html
import re
from pathlib import Path

from harness.dashboard.report_html import to_html
from harness.explain import report, sources

FOLDER = "explain"
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>{title}</title>
<style>body{{font:14px/1.45 system-ui,sans-serif;margin:2em;max-width:80em}}
table{{border-collapse:collapse;font-size:13px}}td,th{{border:1px solid #d8dde3;padding:3px 8px}}
code{{font:12.5px ui-monospace,Menlo,Consolas,monospace}}</style>
</head><body>
<p><a href="../index.html">&larr; dashboard</a> · <a href="../cases/{stem}.html">case page</a> ·
<a href="{md}">markdown</a></p>
{body}
</body></html>
"""


PREFIX_CHARS = 48  # the readable part; with the hash a name stays far below 255 bytes
HASH_CHARS = 16  # hex digits of the id's sha256: 64 bits, no collision among a suite's ids


def file_stem(case_id: str) -> str:
    """A file name for a case id: a readable prefix (the id's letters, digits, `_ . -`, cut to
    PREFIX_CHARS) and a hash of the whole id. Ids that differ only in what the prefix drops
    ('a/b' and 'a_b') or beyond it (long ids) get different files; any id gets a short name."""
    prefix = re.sub(r"[^A-Za-z0-9_.-]", "_", case_id)[:PREFIX_CHARS].lstrip(".") or "case"
    digest = hashlib.sha256(case_id.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]
    return f"{prefix}-{digest}"


def write(out: Path, document: dict, what: str) -> tuple[dict[str, str], dict[str, str]]:
    """Write the pages of every case of `document` under out/explain/; ({case id: page path
    relative to the site}, {case id: the report as an HTML fragment})."""
    source = sources.from_result(document, what)
    folder = out / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    pages: dict[str, str] = {}
    bodies: dict[str, str] = {}
    for case in source.cases:
        stem = file_stem(case.id)
        markdown = report.render(source, (case.id,), markdown=True)
        bodies[case.id] = to_html(markdown)
        (folder / f"{stem}.md").write_text(markdown)
        (folder / f"{stem}.html").write_text(
            PAGE.format(
                title=html.escape(f"{case.id}: explain the gap"),
                md=f"{stem}.md",
                stem=stem,
                body=bodies[case.id],
            )
        )
        pages[case.id] = f"{FOLDER}/{stem}.html"
    kept = {Path(p).stem for p in pages.values()}
    for stale in folder.iterdir():
        if stale.suffix in (".md", ".html") and stale.stem not in kept:
            stale.unlink()
    return pages, bodies
