"""A suite over the GPUs of one host (`runner bench --gpus all|0,1,...`).

One thread per GPU deals itself the next case when its GPU is free; each case still runs in its
own worker process, pinned to that GPU with its own context (runner.execution.isolation). The
unit dealt is a whole case, so the implementations of a case (a baseline and its candidates, a
base and a head) always share one device and one context. Cases go longest expected first
(`--previous RESULT.json`: the worker wall time each case took in an earlier run of the suite),
which is the longest-processing-time rule for N identical machines; cases without a previous
time follow in suite order. A GPU whose case fails in a way that says the device itself failed
(its context could not be made, or its worker died without a result) takes no more cases: it
loses only that in-flight case, and the others go on with the rest.
"""

from __future__ import annotations

import threading
from collections import deque
from pathlib import Path

__all__ = [
    "DEVICE_LOST_PHASES",
    "deal_order",
    "device_lost",
    "parse_gpus",
    "previous_durations",
    "run_sharded",
]

# the phases of a case error that mean the GPU, not the case, failed
DEVICE_LOST_PHASES = ("setup", "crash")


def parse_gpus(text: str, count: int | None = None) -> list[int]:
    """ "all" (needs `count`) or "0,1,3" as CUDA ordinals; ValueError saying what was expected."""
    text = text.strip()
    if text == "all":
        if not count:
            raise ValueError("--gpus all: no CUDA device was found")
        return list(range(count))
    try:
        gpus = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(
            f"--gpus {text!r}: expected 'all' or CUDA ordinals separated by commas, e.g. 0,1"
        ) from None
    if not gpus or any(g < 0 for g in gpus) or len(set(gpus)) != len(gpus):
        raise ValueError(f"--gpus {text!r}: expected distinct ordinals >= 0, e.g. 0,1")
    if count is not None and max(gpus) >= count:
        raise ValueError(f"--gpus {text!r}: this host has {count} CUDA device(s), 0 to {count - 1}")
    return gpus


def previous_durations(document: dict | None) -> dict[str, float]:
    """Case id -> the worker wall time of that case in an earlier result document."""
    if not document:
        return {}
    return {
        c["id"]: float(c["worker_wall_s"])
        for c in document.get("cases", [])
        if isinstance(c.get("worker_wall_s"), int | float)
    }


def load_previous(path: Path | None) -> dict[str, float]:
    if path is None:
        return {}
    from protocol.codec import decode

    return previous_durations(decode(Path(path).read_bytes(), str(path)))


def deal_order(cases: list, expected_s: dict[str, float]) -> list:
    """Longest expected first; cases without an expected time after them, in suite order."""
    known = sorted((c for c in cases if c.id in expected_s), key=lambda c: -expected_s[c.id])
    return known + [c for c in cases if c.id not in expected_s]


def device_lost(case_doc: dict) -> bool:
    return (
        case_doc.get("status") == "failed"
        and (case_doc.get("error") or {}).get("phase") in DEVICE_LOST_PHASES
    )


def run_sharded(cases: list, devices: list[int], run, on_done, not_run, say) -> None:
    """run(case, device) -> case_doc on every case, one thread per device taking the next case
    (in the order given) when free; on_done(case_doc) is called under one lock as each finishes.
    A device whose case failed in a DEVICE_LOST_PHASES phase stops; cases no device is left to
    run get not_run(case, why) -> case_doc."""
    pending = deque(cases)
    lock = threading.Lock()
    lost: list[int] = []

    def serve(device: int) -> None:
        while True:
            with lock:
                if not pending:
                    return
                case = pending.popleft()
            doc = run(case, device)
            with lock:
                on_done(doc)
                if device_lost(doc):
                    lost.append(device)
                    say(
                        f"kernelgap: GPU {device} failed during {case.id} "
                        f"({doc['error']['phase']}); it takes no more cases"
                    )
                    return

    threads = [threading.Thread(target=serve, args=(d,), name=f"gpu{d}") for d in devices]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for case in pending:  # every device failed before these started
        on_done(not_run(case, f"not run: every GPU of the run failed (GPUs {lost})"))
