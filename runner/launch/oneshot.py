"""One-shot kernel launch: one JSON run request in, one JSON response out, in this process.

A compiler's correctness tests launch one kernel with `python -m runner run` (on a GPU box, or
over SSH) without building a C++ runner there. Request and response follow
schemas/run-request.schema.json and schemas/run-response.schema.json; the request is decoded and
checked by runner.launch.run_request (its names also imported from here, the protocol's face:
floats and integers round-trip exactly), launched and answered by runner.launch.fresh_context;
here is the process around it (one answer, whichever thread comes first) and the response's
schema check. `runner run` hands its request to the launch service first
(runner.launch.launch_command) and comes here with `--no-service` or where there is none.

Whatever happens (malformed input, no GPU, PTX that does not load, a signature mismatch, a fault,
a hang) exactly one JSON document is written. `main()`'s exit status: 0 ok, 1 the kernel or a
CUDA call failed (phases load, signature, launch, timeout), 2 bad input or no GPU/driver
(`runner run` itself exits 0 whenever it wrote an answer, as WarpForth's JSON runner does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import BinaryIO

from protocol import validate
from protocol.input_files import MAX_REQUEST_BYTES
from runner.errors import RequestError
from runner.launch.fresh_context import (
    PHASES,
    SingleAnswer,
    error_document,
    execute,
    exit_status,
    output_document,
    private_stdout,  # noqa: F401  (runner run)
    unexpected,
)
from runner.launch.launch_plan import Output
from runner.launch.run_request import (
    DTYPES,
    decode_float,
    decode_json,
    decode_values,
    encode_float,
    encode_values,
    parse_request,
    structure,
)
from runner.launch.run_request import prepare as _prepare

__all__ = [
    "DTYPES",
    "PHASES",
    "Output",
    "decode_float",
    "decode_values",
    "encode_float",
    "encode_values",
    "error_document",
    "exit_status",
    "handle",
    "main",
    "output_document",
    "parse_request",
    "respond",
]

RESPONSE_SCHEMA = "run-response"


# ---- one request -----------------------------------------------------------------------------


def handle(request: dict, *, on_timeout: Callable[[dict], None] | None = None) -> dict:
    """Run one decoded request and return the response document (ok or error); no I/O.

    `on_timeout(document)` is called from a watchdog thread when the kernel runs past the
    request's timeout_s; it must end the process (a hung kernel cannot be cancelled). Without it
    there is no watchdog.
    """
    try:
        prepared = _prepare(request)
    except RequestError as exc:
        return error_document(exc.phase, exc.message)
    except Exception as exc:
        return unexpected("input", exc)
    return _checked(execute(prepared, on_timeout))


def _checked(response: dict) -> dict:
    """The response if it matches its schema, else an error document saying why (a runner bug)."""
    try:
        validate(structure(response), RESPONSE_SCHEMA, "response")
    except ValueError as exc:
        return error_document("launch", f"internal error: {exc}")
    return response


# ---- process entry point ---------------------------------------------------------------------


def _SingleAnswer(out: BinaryIO, status: Callable[[dict], int] = exit_status) -> SingleAnswer:
    """The one answer of this process, a timeout's checked against the schema as any other."""
    return SingleAnswer(out, status, _checked)


def _read_bounded(stdin: BinaryIO) -> bytes:
    raw = stdin.read(MAX_REQUEST_BYTES + 1)
    if len(raw) > MAX_REQUEST_BYTES:
        raise RequestError(
            "input",
            f"stdin: the request is larger than {MAX_REQUEST_BYTES} bytes; send large arrays "
            "with `count` (zero-filled) or split the launch",
        )
    return raw


def respond(
    read: Callable[[], dict], out: BinaryIO, status: Callable[[dict], int] = exit_status
) -> int:
    """Run the request `read()` returns in this process and write its one answer to `out` (the
    watchdog's, for a hung kernel); the exit status is what `status` gives that answer."""
    answer = _SingleAnswer(out, status)
    try:
        response = handle(read(), on_timeout=answer.timeout_and_exit)
    except RequestError as exc:
        response = error_document(exc.phase, exc.message)
    except Exception as exc:
        response = unexpected("input", exc)
    response = _checked(response)
    answer.write(response)
    return status(response)


def main(stdin: BinaryIO, stdout: BinaryIO, status: Callable[[dict], int] = exit_status) -> int:
    """Read one request from `stdin`, write one response to `stdout`, return the exit status."""
    return respond(lambda: decode_json(_read_bounded(stdin)), stdout, status)
