"""Text for a terminal: every control character made visible, one function for both CLIs.

Names and messages come from documents, manifests and compilers' output that anyone can write;
printed raw, ESC ]0;...BEL retitles the terminal, ESC [2J clears it and a bidirectional override
reverses what follows. The runner (`runner check`'s report, its error lines) and the harness
(every text report and error line) print such text only through `visible()`.
"""

from __future__ import annotations

__all__ = ["visible"]


def visible(text: object, *, lines: bool = False) -> str:
    """`text` with every non-printable character (ESC, BEL, bidirectional overrides, and
    newlines unless `lines`) written as Python's repr writes it (\\x1b, \\x07, \\u202e, \\n);
    the rest unchanged. lines=True keeps newlines, for a multi-line message."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or (lines and c == "\n") else repr(c)[1:-1] for c in text)
