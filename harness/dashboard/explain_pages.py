"""The dashboard's explain/ pages: for each case of the newest run, `harness explain` as markdown
(explain/<stem>.md, to paste into an issue or a pull request) and as a page that opens from disk
(explain/<stem>.html, the report as HTML by `to_html`: no network); <stem>
is file_stem(case id), a readable prefix and a hash of the id. The table
of the newest gaps links each case to its page. Pages of cases the newest run lacks are removed,
so explain/ always describes the run the table shows.

`to_html`: `harness explain`'s markdown as HTML, for the dashboard's pages: no markdown library, no
network. It reads only what harness.explain.report writes: headings (## and ###), numbered
lists, **bold** lines, pipe tables, <details><summary> folds (whole lines, the report's own),
`code` spans and backslash escapes. The report's data went through harness.escaping.markdown,
which writes & < > as entities; any < or > left outside a code span is escaped here too, so
no markup can come from the data.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from harness.escaping import html
from harness.explain import report, sources

__all__ = ["FOLDER", "file_stem", "to_html", "write"]

FOLDER = "explain"
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>body{{font:14px/1.45 system-ui,sans-serif;margin:2em;max-width:80em;overflow-wrap:anywhere}}
table{{display:block;overflow-x:auto}} pre{{overflow-x:auto}}
@media (max-width:700px){{body{{margin:1em 12px}}}}
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
                title=html(f"{case.id}: explain the gap"),
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


FOLD = re.compile(r"^<details><summary>([^<>]*)</summary>$")
CODE = re.compile(r"(`+)(.+?)\1")
ESCAPED = re.compile(r"\\([\\`*_\[\]{}()#+\-.!|~])")
CELL_SPLIT = re.compile(r"(?<!\\)\|")


def _inline(text: str) -> str:
    """One line's inline markup: code spans (their content literal) and bold; the rest with
    its backslash escapes undone and < > escaped."""
    out, at = [], 0
    for m in CODE.finditer(text):
        out.append(_plain(text[at : m.start()]))
        out.append(f"<code>{html(m.group(2).strip())}</code>")
        at = m.end()
    out.append(_plain(text[at:]))
    return "".join(out)


def _plain(text: str) -> str:
    text = ESCAPED.sub(r"\1", text.replace("<", "&lt;").replace(">", "&gt;"))
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)


def _table(lines: list[str]) -> str:
    rows = [[c.strip() for c in CELL_SPLIT.split(line.strip().strip("|"))] for line in lines]
    head, body = rows[0], [r for r in rows[1:] if not all(set(c) <= set("-: ") for c in r)]
    out = ["<table><thead><tr>", *(f"<th>{_inline(c)}</th>" for c in head), "</tr></thead><tbody>"]
    for row in body:
        out += ["<tr>", *(f"<td>{_inline(c)}</td>" for c in row), "</tr>"]
    return "".join([*out, "</tbody></table>"])


def to_html(markdown: str) -> str:
    """The report's markdown (module doc) as an HTML fragment."""
    out: list[str] = []
    lines = markdown.splitlines()
    k = 0
    while k < len(lines):
        line = lines[k]
        if line.startswith("|"):
            end = k
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            out.append(_table(lines[k:end]))
            k = end
            continue
        if re.match(r"^\d+\. ", line):
            items = []
            while k < len(lines) and re.match(r"^\d+\. ", lines[k]):
                items.append(f"<li>{_inline(lines[k].split('. ', 1)[1])}</li>")
                k += 1
            out.append("<ol>" + "".join(items) + "</ol>")
            continue
        fold = FOLD.match(line)
        if fold:
            out.append(f"<details><summary>{html(fold.group(1))}</summary>")
        elif line == "</details>":
            out.append("</details>")
        elif line.startswith("### "):
            out.append(f"<h3>{_inline(line[4:])}</h3>")
        elif line.startswith("## "):
            out.append(f"<h2>{_inline(line[3:])}</h2>")
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
        k += 1
    return "\n".join(out) + "\n"
