"""The response documents of a launch (schemas/run-response.schema.json): its outputs, an error
by phase, and the exit status each one means. Every launch path (`runner run`, `runner serve`'s
worker, `runner launch --no-service`) answers with these. Standard library only.
"""

from __future__ import annotations

import base64

from protocol.version import RUN_PROTOCOL_VERSION
from runner.launch import host_arrays
from runner.launch.launch_plan import Output, Param, Request

__all__ = ["LAUNCH_ELSEWHERE", "PHASES", "cuda_failure", "error_document", "exit_status",
           "output_document", "read_outputs", "timeout_document", "unexpected"]  # fmt: skip

PHASES = ("input", "environment", "load", "signature", "launch", "timeout")
# What a compiler's test can do on a machine without a GPU (docs/service.md).
LAUNCH_ELSEWHERE = (
    "send the request to a GPU box with kernelgap installed: `ssh gpu-host python3 -m runner run "
    "< request.json`, or one `runner serve` for a whole test session through "
    "harness.client.KernelClient.over_ssh"
)


def error_document(phase: str, message: str, cuda_error: str | None = None) -> dict:
    document = {
        "status": "error",
        "schema_version": RUN_PROTOCOL_VERSION,
        "phase": phase,
        "error": message or "(no message)",
    }
    if cuda_error:
        document["cuda_error"] = cuda_error
    return document


def exit_status(response: dict) -> int:
    """0 ok; 2 bad input or environment; 1 any other failure (load, signature, launch, timeout)."""
    if response["status"] == "ok":
        return 0
    return 2 if response["phase"] in ("input", "environment") else 1


def cuda_failure(phase: str, exc: Exception) -> dict:
    return error_document(phase, str(exc), getattr(exc, "name", None))


def unexpected(phase: str, exc: BaseException) -> dict:
    return error_document(phase, f"unexpected {type(exc).__name__}: {exc}")


def timeout_document(request: Request) -> dict:
    return error_document(
        "timeout",
        f"kernel {request.kernel!r} did not finish within timeout_s={request.timeout_s:g} s; "
        "the runner process was ended to free the GPU",
    )


def output_document(out: Output, param: Param, data) -> dict:
    """One output of a response from its host copy (`data`: the device's little-endian bytes,
    or a numpy array of them): JSON values, or with encoding = base64 the raw bytes."""
    raw = memoryview(data).cast("B")
    document = {"param": out.param, "type": param.type_name}
    if out.base64:
        document["data_base64"] = base64.b64encode(raw).decode()
    else:
        document["values"] = host_arrays.values(param.kind, raw)
    return document


def read_outputs(request: Request, buffers: dict) -> list[dict]:
    """The outputs a request asks for, read back from its device buffers (by param index)."""
    outputs = []
    for out in request.outputs:
        param = request.params[out.param]
        raw = buffers[out.param].download_bytes(out.count * host_arrays.ITEMSIZE[param.kind])
        outputs.append(output_document(out, param, raw))
    return outputs
