"""protocol.input_files.read_bounded: a regular file read whole up to its limit, sized from the
file (not the limit), and still bounded when the file grows after its size was taken."""

from __future__ import annotations

import os
import types

import pytest

from protocol import input_files
from protocol.errors import InputFileError
from protocol.input_files import read_bounded


def test_a_file_within_its_limit_is_read_whole(tmp_path):
    path = tmp_path / "doc.json"
    path.write_bytes(b"x" * 1000)
    assert read_bounded(path, 1000, "document") == b"x" * 1000


def test_a_file_past_its_limit_is_refused_naming_it(tmp_path):
    path = tmp_path / "doc.json"
    path.write_bytes(b"x" * 1001)
    with pytest.raises(InputFileError, match=rf"{path}: the document is larger than 1000 bytes"):
        read_bounded(path, 1000, "document")


@pytest.mark.parametrize(("size", "limit", "refused"), [(1000, 5000, False), (6000, 5000, True)])
def test_a_file_that_grew_after_its_size_was_taken_is_read_to_its_limit(
    tmp_path, monkeypatch, size, limit, refused
):
    path = tmp_path / "doc.json"
    path.write_bytes(b"y" * size)
    real = os.fstat

    def stale(fd):  # the size before the file grew to `size` bytes
        status = real(fd)
        return types.SimpleNamespace(st_mode=status.st_mode, st_size=10)

    monkeypatch.setattr(input_files.os, "fstat", stale)
    if refused:
        with pytest.raises(InputFileError, match="larger than 5000 bytes"):
            read_bounded(path, limit, "document")
    else:
        assert read_bounded(path, limit, "document") == b"y" * size
