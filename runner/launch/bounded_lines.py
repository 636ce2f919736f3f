"""Lines of a byte stream read with a bounded buffer: an overlong line is read on in chunks and
dropped as it streams, so a line of any length costs at most `limit` bytes of memory."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class Line:
    """One line: its bytes (None when it was longer than the limit) and its length in bytes,
    the newline left out."""

    data: bytearray | None
    length: int

    @property
    def blank(self) -> bool:
        return self.data is not None and not self.data.strip()


def bounded_lines(stream: BinaryIO, limit: int, chunk: int = CHUNK_BYTES) -> Iterator[Line]:
    """Each line of `stream` (the last one may lack its newline); a line longer than `limit`
    bytes comes back as Line(None, length) once all of it has been read and dropped."""
    while True:
        buffer, length, kept = bytearray(), 0, True
        while True:
            piece = stream.readline(chunk)
            if not piece:
                break
            ends = piece.endswith(b"\n")
            length += len(piece) - ends
            if kept and length <= limit:
                buffer += piece[: len(piece) - ends]
            elif kept:
                buffer, kept = bytearray(), False  # past the limit: drop what was kept
            if ends:
                break
        if not piece and length == 0 and not buffer:
            return  # end of stream (a final newline-less empty line is nothing)
        yield Line(buffer if kept else None, length)
        if not piece:
            return
