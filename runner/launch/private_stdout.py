"""The answer's stdout for a launch process (`runner run`, `runner serve`, `runner launch`).

A kernel's printf is written by the driver to file descriptor 1: pointing fd 1 at stderr keeps
it out of the answer, which goes to a private duplicate of the original stdout. Its own module
(standard library only) so the process-per-launch path imports nothing else for it.
"""

from __future__ import annotations

import os
import sys
from typing import BinaryIO

__all__ = ["private_stdout"]


def private_stdout() -> BinaryIO:
    """The process's stdout for the response alone: file descriptor 1 then points at stderr, so a
    kernel's printf (written to fd 1 by the driver) can never land in the JSON answer."""
    sys.stdout.flush()
    response = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    return response
