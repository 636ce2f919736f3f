"""Text from result documents made safe to show: one function per output kind, on a terminal
(`terminal`), in markdown (`markdown`), in HTML (`html`) and in CSV (`csv_text` for a text cell,
`csv_row` for a row), and an error message's first line, what a one-line note shows of it.

Names (suite, case, implementation, GPU) and error messages come from documents anyone can
write (a pull request's run, a hand-edited file). Shown raw, an escape sequence would drive the
reader's terminal, and HTML or a link would reach job summaries and pull-request comments.
Only what is printed changes; stored data never does. Every markdown writer in the harness
(summary, compare, regressions, the markdown and nvbench-markdown exports, and every table
through harness.reporting.table) passes each data-derived piece through `markdown()`; every text
report for a terminal (ingest, history, `harness explain --format text`, every plain-text table
through harness.reporting.table) through `terminal()`; every CSV row through `csv_row()`.
"""

from __future__ import annotations

import csv
import html as html_text
import io
import re
from collections.abc import Sequence

from protocol.progress import visible

__all__ = ["csv_row", "csv_text", "first_line", "html", "markdown", "no_autolinks", "terminal"]

# One pass of a translation table: each character is replaced once, the backslash included.
_PLAIN = {
    "\\": "\\\\",  # the escape character itself, so the data cannot escape what follows
    "`": "\\`",  # no code span can start (it would turn later escaped text back into raw text)
    "[": "\\[",  # no link or image
    "]": "\\]",
    "&": "&amp;",
    "<": "&lt;",  # no HTML: <img onerror=...>, <a href=javascript:...>
    ">": "&gt;",
}
_PLAIN_TABLE = str.maketrans(_PLAIN)
_CELL_TABLE = str.maketrans({**_PLAIN, "|": "\\|"})
_FOLDED = re.compile(r"[\r\n\t]+")
# GFM's autolink extension links `http://`, `https://`, `ftp://`, `mailto:`, `xmpp:`, `www.`
# and bare e-mail addresses in plain text. A backslash escape of the `:` or `.` that the
# extension looks for keeps the text the same on screen and leaves it nothing to match; an
# address is matched after escapes are read, so a zero-width space (&#8203;) follows its `@`.
_SCHEME_COLON = re.compile(r"(?i)(https?|ftp|mailto|xmpp):")
_WWW_DOT = re.compile(r"(?i)(www)\.")
_EMAIL_AT = re.compile(r"(?<=[A-Za-z0-9._+-])@(?=[A-Za-z0-9_-]+\.[A-Za-z0-9])")
_BACKTICKS = re.compile(r"`+")


def terminal(text: object, *, lines: bool = False) -> str:
    """`text` with every non-printable character (control characters such as ESC, newlines
    unless `lines`, bidirectional overrides) written as Python's repr writes it (\\x1b, \\n,
    \\u202e); the rest unchanged. protocol.progress.visible, shared with the runner."""
    return visible(text, lines=lines)


def markdown(text: object, *, cell: bool = False, code: bool = False) -> str:
    """`text` (data, never markup) as markdown that shows it literally and carries no markup.

    Newlines and tabs fold into one space and other non-printable characters are escaped
    (`terminal()`). Then, by default, `& < >` become entities and `` \\ ` [ ] `` are
    backslash-escaped: no HTML, link, image or code span can start from the data, and
    no_autolinks() leaves GFM nothing to autolink.
    code=True writes an inline code span whose fence is longer than any run of backticks in
    the text (CommonMark: a code span's content is literal, HTML included). cell=True is for a
    table cell: `|` is escaped too (GitHub reads `\\|` inside a code span as well); a code span
    in a cell holding `|` or a backslash is written as plain text instead, since GitHub's table
    splitter would read the span's literal backslashes as escapes.
    """
    text = terminal(_FOLDED.sub(" ", str(text)))
    if code and text and not (cell and ("|" in text or "\\" in text)):
        fence = "`" * (max((len(m) for m in _BACKTICKS.findall(text)), default=0) + 1)
        pad = " " if text.startswith("`") or text.endswith("`") else ""
        return f"{fence}{pad}{text}{pad}{fence}"
    return no_autolinks(text.translate(_CELL_TABLE if cell else _PLAIN_TABLE))


def no_autolinks(text: str) -> str:
    """Markdown `text` with what makes GFM autolinks broken (`http\\://`, `www\\.`,
    `user@&#8203;host.example`): shown the same, linked nowhere (checked with cmark-gfm)."""
    text = _SCHEME_COLON.sub(r"\1\\:", text)
    text = _WWW_DOT.sub(r"\1\\.", text)
    return _EMAIL_AT.sub("@&#8203;", text)


def html(text: object) -> str:
    """`text` as HTML text or an attribute value: `& < > " '` as entities, and non-printable
    characters (bidirectional overrides, control characters) written visibly, as terminal()
    writes them, but for newlines."""
    return html_text.escape(terminal(text, lines=True), quote=True)


# A spreadsheet reads a cell starting with one of these as a formula (=HYPERLINK(...) phones
# home); OWASP's CSV-injection guidance: a leading `'` shows it as text.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")


def csv_text(text: str) -> str:
    """A CSV text cell as a spreadsheet shows it, never as a formula: `'` before a formula's
    first character. Numbers are written by the caller, never through this."""
    return f"'{text}" if text.startswith(FORMULA_STARTS) else text


def csv_row(cells: Sequence[str]) -> str:
    """One CSV row (RFC 4180, no line end): a cell holding a comma, quote, carriage return or
    newline quoted whole, so no reader splits the row inside it."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerow(cells)  # quotes what holds \r or \n
    return out.getvalue().removesuffix("\r\n")


def first_line(text: str) -> str:
    """The first non-empty line of an error message (the rest is usually a traceback)."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")
