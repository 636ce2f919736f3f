"""What a captured call's CUDA graph holds, judged before anything is timed.

Hot samples replay the graph of a call, not the call: what the graph does not hold is not
timed. Three contents make a row's time stand for less than the op's work, and refuse it:
- an empty graph: the call launched nothing on the timing stream while it was captured (its
  work went to another stream, such as the legacy default stream, or was done on the host, or
  the call does nothing while a capture is under way); replayed, it reads x0.000;
- a graph of copies only, with copies left out of the time (count_copies=False): nothing of it
  would be timed (a result kept from an earlier call and copied out); with copies counted it is
  timed as the copies it is, and only with recheck, which verifies its outputs on fresh inputs;
- a copy that writes an output, with copies left out: the output is made by untimed work.
Pure functions of the graph's node types and copy destinations, so they are tested on the CPU.
"""

from __future__ import annotations

__all__ = ["WORK_NODES", "graph_problems"]

# Graph nodes that compute on the device; a memcpy is a copy, the rest (empty, event, wait, host
# function, allocation) do no device work of the call's own
WORK_NODES = frozenset({"KERNEL", "MEMSET", "GRAPH", "CONDITIONAL", "BATCH_MEM_OP"})


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[1] > 0 and b[1] > 0 and a[0] < b[0] + b[1] and b[0] < a[0] + a[1]


def graph_problems(
    node_types: list[str],
    copy_targets: list[tuple[int, int]],
    output_ranges: list[tuple[int, int]],
    count_copies: bool,
    recheck: bool,
) -> list[str]:
    """Why a 1-call graph of `node_types` (KERNEL, MEMCPY, ...) cannot stand for the call's
    work; `copy_targets` are the (address, bytes) its memcpy nodes write, `output_ranges` the
    (address, bytes) of the call's outputs. Empty when the graph is fine."""
    if not node_types:
        return [
            "its captured CUDA graph is empty: the call launched no work on the timing stream "
            "while it was captured (work on another stream, such as the legacy default stream, "
            "a result made on the host, or a call that does nothing while a CUDA graph is being "
            "captured), so its replays would time nothing"
        ]
    work = sum(t in WORK_NODES for t in node_types)
    copies = sum(t == "MEMCPY" for t in node_types)
    if not work and copies and not count_copies:
        return [
            f"its captured CUDA graph holds only copies ({copies}), which the case leaves out of "
            "the time, so nothing of the call would be timed (a result kept from an earlier call "
            "and copied out); declare count_copies=True if copying is the op"
        ]
    if not work:
        if copies and recheck:
            return []
        kinds = ", ".join(sorted(set(node_types)))
        what = f"only copies ({copies})" if copies else f"no device work (nodes: {kinds})"
        return [
            f"its captured CUDA graph holds {what}; such a call is timed only with recheck on, "
            "which verifies its outputs on fresh inputs"
        ]
    if count_copies:
        return []
    written = [
        i
        for i, out in enumerate(output_ranges)
        if any(_overlaps(target, out) for target in copy_targets)
    ]
    if not written:
        return []
    size = sum(
        b for t, b in copy_targets if any(_overlaps((t, b), output_ranges[i]) for i in written)
    )
    return [
        f"copies in its captured CUDA graph write output(s) {written} ({size} bytes), and the case "
        "leaves copies out of the time: an output made by a copy (a result kept and copied out) "
        "is not timed work; declare count_copies=True to time the copies"
    ]
