"""The remote's stderr during `harness run`: shown as it arrives, its last lines kept for error
messages, and the runner's partial-document lines kept out of sight (the last one is saved).
Control bytes other than newline and tab are shown as \\xNN: the runner already writes its lines
through protocol.terminal_text.visible, and what a target sends besides reaches no terminal as a
command (ESC ]0;... BEL, ESC [2J)."""

from __future__ import annotations

import re
import sys

from protocol.progress import PARTIAL_DOCUMENT_PREFIX as PARTIAL_PREFIX

__all__ = ["TAIL_LINES", "StderrTail"]

TAIL_LINES = 8
_CONTROL_BYTES = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]")


def _visible_bytes(data: bytes) -> bytes:
    return _CONTROL_BYTES.sub(lambda m: b"\\x%02x" % m.group()[0], data)


class StderrTail:
    """The remote's stderr: written to ours as it arrives, with the last lines kept for messages.

    Lines carrying the runner's partial document are not shown; the last one is kept, so a
    dropped connection still leaves every case measured so far on disk.
    """

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr.buffer
        self.data = b""
        self.partial: bytes | None = None
        self._pending = b""  # the start of a line that may be a partial document
        self._mid_line = False  # part of the current line was already shown: it is ordinary

    def __call__(self, chunk: bytes) -> None:
        shown = []
        data = self._pending + chunk
        self._pending = b""
        while data:
            end = data.find(b"\n")
            if end < 0:
                if not self._mid_line and (
                    data.startswith(PARTIAL_PREFIX) or PARTIAL_PREFIX.startswith(data)
                ):
                    self._pending = data  # wait for the rest of the line
                else:  # an unfinished ordinary line is shown at once (progress without a newline)
                    shown.append(data)
                    self._mid_line = True
                break
            line, data = data[: end + 1], data[end + 1 :]
            if not self._mid_line and line.startswith(PARTIAL_PREFIX):
                self.partial = line[len(PARTIAL_PREFIX) :].rstrip(b"\n")
            else:
                shown.append(line)
            self._mid_line = False
        if shown:
            text = _visible_bytes(b"".join(shown))
            self.stream.write(text)
            self.stream.flush()
            self.data = (self.data + text)[-16384:]

    def lines(self, count: int = TAIL_LINES) -> str:
        text = self.data.decode("utf-8", "replace").rstrip().splitlines()
        return "\n".join(f"  | {line}" for line in text[-count:]) or "  | (nothing on stderr)"
