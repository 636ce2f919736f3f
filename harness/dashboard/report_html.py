"""`harness explain`'s markdown as HTML, for the dashboard's pages: no markdown library, no
network. It reads only what harness.explain.report writes: headings (## and ###), numbered
lists, **bold** lines, pipe tables, <details><summary> folds (whole lines, the report's own),
`code` spans and backslash escapes. The report's data went through harness.escaping.markdown,
which writes & < > as entities; any < or > left outside a code span is escaped here too, so
no markup can come from the data.
"""

from __future__ import annotations

import html
import re

__all__ = ["to_html"]

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
        out.append(f"<code>{html.escape(m.group(2).strip(), quote=False)}</code>")
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
            out.append(f"<details><summary>{html.escape(fold.group(1))}</summary>")
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
