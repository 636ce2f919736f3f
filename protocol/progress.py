"""What travels on a runner's stderr besides human progress, and how that progress is shown.

`runner bench --emit-partial` writes, after every case, one line: PARTIAL_DOCUMENT_PREFIX followed
by the compact JSON of the document so far (`complete: false`). A host that loses the connection
keeps the last such line, so no finished case is lost; the line is never shown to a person.

Progress itself is plain lines on stderr. Where stderr is a terminal, `Live` adds a status line
under them (tqdm: what runs, how far, for how long, the time left): the runner's position lines
(`kernelgap: [3/8] ...: case`) move it, whether the runner prints them here (`runner bench`) or
a GPU box's stream carries them (`harness run`). Elsewhere (CI logs, files) nothing changes.

Text for a terminal: every control character made visible, one function for both CLIs.

Names and messages come from documents, manifests and compilers' output that anyone can write;
printed raw, ESC ]0;...BEL retitles the terminal, ESC [2J clears it and a bidirectional override
reverses what follows. The runner (`runner check`'s report, its error lines) and the harness
(every text report and error line) print such text only through `visible()`."""

from __future__ import annotations

import io
import re
import sys
import threading

__all__ = ["PARTIAL_DOCUMENT_PREFIX", "Live", "visible"]


def visible(text: object, *, lines: bool = False) -> str:
    """`text` with every non-printable character (ESC, BEL, bidirectional overrides, and
    newlines unless `lines`) written as Python's repr writes it (\\x1b, \\x07, \\u202e, \\n);
    the rest unchanged. lines=True keeps newlines, for a multi-line message."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or (lines and c == "\n") else repr(c)[1:-1] for c in text)


PARTIAL_DOCUMENT_PREFIX = b"kernelgap-partial-document: "


# runner.execution.suite.position() after "kernelgap: ", then ": <case id>"
POSITION = re.compile(r"kernelgap: \[(\d+)/(\d+)\][^:]*: (\S+)")


REFRESH_S = 0.5  # the elapsed time moves while a long case runs


COUNTED = "{desc}: {n_fmt}/{total_fmt}{unit} |{bar}| {elapsed} so far, {remaining} left{postfix}"


UNCOUNTED = "{desc}: {elapsed}{postfix}"


class Live:
    """A context: on a terminal (and unless quiet), every line written to sys.stderr goes above
    a status line that `advance` and the position lines move; otherwise it does nothing."""

    def __init__(self, what: str, *, unit: str = "cases", quiet: bool = False):
        self.what, self.unit, self.quiet = what, unit, quiet
        self.bar = None
        self.lock = threading.RLock()
        self._stop = threading.Event()

    def __enter__(self) -> Live:
        stream = sys.stderr
        if self.quiet or not getattr(stream, "isatty", lambda: False)():
            return self
        from tqdm import tqdm

        self.real = stream
        self.bar = tqdm(desc=self.what, unit=f" {self.unit}", file=stream, leave=False,
                        dynamic_ncols=True, bar_format=UNCOUNTED)  # fmt: skip
        sys.stderr = _AboveTheStatus(self, stream)
        threading.Thread(target=self._tick, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is None:
            return
        self._stop.set()
        with self.lock:
            if sys.stderr.pending:
                self.show([sys.stderr.pending])
            sys.stderr = self.real
            self.bar.close()
            self.bar = None

    def advance(self, done: int, total: int | None = None, label: str = "") -> None:
        """`done` of `total` finished, `label` the one under way."""
        with self.lock:
            if self.bar is None:
                return
            if total is not None and self.bar.total != total:
                self.bar.total, self.bar.bar_format = total, COUNTED
            self.bar.n = done
            self.bar.set_postfix_str(label, refresh=False)
            self.bar.refresh()

    def show(self, lines: list[str]) -> None:
        """Lines above the status line; a position line among them moves it."""
        with self.lock:
            if self.bar is None:  # closed while a thread still wrote
                self.real.write("".join(f"{line}\n" for line in lines))
                return
            self.bar.clear()
            self.real.write("".join(f"{line}\n" for line in lines))
            self.real.flush()
            for line in lines:
                found = POSITION.search(line)
                if found:
                    self.advance(int(found[1]) - 1, int(found[2]), found[3])
            self.bar.refresh()

    def _tick(self) -> None:
        while not self._stop.wait(REFRESH_S):
            with self.lock:
                if self.bar is not None:
                    self.bar.refresh()


class _AboveTheStatus(io.TextIOBase):
    """sys.stderr while a status line is shown: whole lines go above it, text and bytes alike
    (`buffer`: the harness streams a GPU box's stderr as bytes)."""

    def __init__(self, live: Live, real):
        self.live, self.real, self.pending = live, real, ""
        self.buffer = _Bytes(self)

    def write(self, text: str) -> int:
        with self.live.lock:
            *lines, self.pending = (self.pending + text).split("\n")
            if lines:
                self.live.show(lines)
        return len(text)

    def flush(self) -> None:  # a line still open waits for its end (a stream's chunks split lines)
        self.real.flush()

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.real.fileno()

    @property
    def encoding(self) -> str:
        return self.real.encoding


class _Bytes(io.RawIOBase):
    def __init__(self, text: _AboveTheStatus):
        self.text = text

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.text.write(bytes(data).decode("utf-8", "replace"))
        return len(data)

    def flush(self) -> None:
        pass
