"""When and from which checkout a document was made: the UTC time and the git commit (no GPU)."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["git_commit", "utc_now"]

GIT_TIMEOUT_S = 10.0


def git_commit(path: str | Path) -> dict:
    """{"commit": sha, "dirty": bool} of the git checkout holding `path`, else both None."""
    target = Path(path)
    directory = target if target.is_dir() else target.parent
    unknown = {"commit": None, "dirty": None}
    try:
        head = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
        )
        status = subprocess.run(
            ["git", "-C", str(directory), "status", "--porcelain"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return unknown
    sha = head.stdout.strip()
    if head.returncode != 0 or status.returncode != 0 or not sha:
        return unknown
    return {"commit": sha, "dirty": bool(status.stdout.strip())}


def utc_now() -> str:
    """Now in UTC as ISO 8601 with microseconds and a Z: 2025-01-31T12:34:56.123456Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
