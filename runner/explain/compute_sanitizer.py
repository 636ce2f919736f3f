"""compute-sanitizer: the command line that checks one launch of one implementation, and its
report parsed into a `sanitize` entry of `runner check --sanitize`'s document.

`compute-sanitizer --tool TOOL --print-limit N --log-file LOG <driver>` writes, for each error,
a block of lines that all start with the tool's prefix, a first line saying what was found
and indented lines saying where, then one summary line:

    ========= COMPUTE-SANITIZER
    ========= Invalid __global__ read of size 8 bytes
    =========     at scale_f64+0x70
    =========     by thread (3,0,0) in block (16,0,0)
    =========     Address 0x7f3c1e000800 is out of bounds
    =========
    ========= ERROR SUMMARY: 1 error

racecheck's blocks start with "Error: Race reported between ..." (or "Warning: ...") and its
summary reads "RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)". A kernel's name is
taken from the block's "at NAME+0xOFFSET" or "in NAME" line. Counts come from the summary
lines (they include what --print-limit left out); a report without one is not trusted.
"""

from __future__ import annotations

import re

from runner.errors import SanitizerOutputError

__all__ = ["TOOLS", "command", "parse"]

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
# initcheck too: scratch read before it is written passes wherever it happens to hold zeros
DEFAULT_TOOLS = TOOLS
PRINT_LIMIT = 20  # error blocks printed per run; the summary still counts every one
FIRST_LINES = 6  # lines kept of each block
KEPT_BLOCKS = 5  # blocks kept per run

_PREFIX = re.compile(r"^=+ ?")
_ERROR_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+errors?")
_RACE_SUMMARY = re.compile(
    r"RACECHECK SUMMARY:\s*(\d+)\s+hazards?\s+displayed\s*\(\s*(\d+)\s+errors?,\s*(\d+)\s+warnings?\s*\)"
)
_NAME = r"([A-Za-z_$][\w$.]*)"
_AT_OFFSET = re.compile(r"\bat\s+" + _NAME + r"(?:\([^)]*\))?\+0x")  # at scale_f64+0x70
_IN_NAME = re.compile(r"\bin\s+" + _NAME + r"(?:\(|$|\s)")  # at 0x70 in scale_f64(double*)
_NOT_KERNELS = frozenset({"block", "thread", "warp"})  # "by thread (0,0,0) in block (1,0,0)"
_NOT_A_FINDING = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "LEAK SUMMARY")


def command(path: str, tool: str, driver: list[str], log_file: str) -> list[str]:
    """compute-sanitizer running `tool` over the `driver` process, its report in `log_file`."""
    if tool not in TOOLS:
        raise ValueError(f"compute-sanitizer tool {tool!r} is not one of {', '.join(TOOLS)}")
    return [
        path,
        "--tool",
        tool,
        "--print-limit",
        str(PRINT_LIMIT),
        "--log-file",
        log_file,
        *driver,
    ]


def _blocks(text: str) -> list[list[str]]:
    """The report's error blocks: each a first line and its indented lines, prefix removed."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for raw in text.splitlines():
        if not _PREFIX.match(raw):
            current = None
            continue
        body = _PREFIX.sub("", raw, count=1)
        if not body.strip():
            current = None
        elif body.startswith((" ", "\t")):
            if current is not None:
                current.append(body.strip())
        elif body.startswith(_NOT_A_FINDING):
            current = None
        else:
            current = [body.strip()]
            blocks.append(current)
    return blocks


def _kernel(block: list[str]) -> str | None:
    """The kernel a block names: "at NAME+0x.." first, else "in NAME" (not a file path)."""
    for pattern in (_AT_OFFSET, _IN_NAME):
        for line in block:
            found = pattern.search(line)
            if found and found.group(1) not in _NOT_KERNELS:
                return found.group(1)
    return None


def _kind(first_line: str) -> str:
    """What a block reports, without its addresses and sizes' variable tail."""
    kind = re.sub(r"^(Error|Warning):\s*", "", first_line)
    kind = re.sub(r"\s+at\s+(0x[0-9a-fA-F]+|\S+\+0x[0-9a-fA-F]+).*$", "", kind)
    return kind.strip()


def parse(text: str) -> dict:
    """{"errors", "warnings", "findings": [{"kind", "kernel", "lines"}], "kinds", "kernels"}
    from one tool's report; SanitizerOutputError when it has no summary line."""
    errors = warnings = None
    for line in text.splitlines():
        race = _RACE_SUMMARY.search(line)
        if race:
            errors = (errors or 0) + int(race.group(2))
            warnings = (warnings or 0) + int(race.group(3))
            continue
        summary = _ERROR_SUMMARY.search(line)
        if summary:
            errors = max(errors or 0, int(summary.group(1)))
    if errors is None:
        quoted = " | ".join(line.strip() for line in text.strip().splitlines()[-6:])
        raise SanitizerOutputError(
            f"compute-sanitizer's report has no ERROR SUMMARY or RACECHECK SUMMARY line "
            f"(the tool or the program did not finish): {quoted or '(empty)'}"
        )
    blocks = _blocks(text)
    findings = [
        {"kind": _kind(b[0]), "kernel": _kernel(b), "lines": b[:FIRST_LINES]}
        for b in blocks[:KEPT_BLOCKS]
    ]
    kinds = sorted({f["kind"] for f in findings})
    kernels = sorted({f["kernel"] for f in findings if f["kernel"]})
    return {
        "errors": errors,
        "warnings": warnings or 0,
        "findings": findings,
        "kinds": kinds,
        "kernels": kernels,
    }
