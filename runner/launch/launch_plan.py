"""A checked launch as the runner executes it: `Request`, its `Param`s and `Output`s.

Built from a run request by runner.launch.run_request (any request, numpy arrays) or by
runner.launch.quick_request (the command line's, packed bytes); executed by
runner.launch.fresh_context or the service's worker. No numpy here, so the process-per-launch
path can hold one without importing it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Output", "Param", "Request", "signature"]


@dataclass(frozen=True)
class Param:
    """One kernel parameter: a scalar (`value`) or a device array (`array`, allocated whole:
    its host contents, a numpy array or little-endian bytes, anything with the buffer
    protocol)."""

    kind: str
    value: int | float | None = None
    array: object | None = None

    @property
    def type_name(self) -> str:
        return f"{self.kind}[]" if self.array is not None else self.kind

    @property
    def nbytes(self) -> int:
        return memoryview(self.array).nbytes


@dataclass(frozen=True)
class Output:
    param: int
    count: int
    base64: bool = False  # encoding = "base64": raw little-endian bytes in data_base64


@dataclass(frozen=True)
class Request:
    ptx: str
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    timeout_s: float
    params: tuple[Param, ...]
    outputs: tuple[Output, ...]


def signature(request: Request) -> list[tuple[str, str]]:
    """The .entry signature the request's params imply (a pointer for each array)."""
    return [
        (f"params[{i}]", "ptr" if p.array is not None else p.kind)
        for i, p in enumerate(request.params)
    ]
