"""The command lines of the runners a compiler's test suite already calls, so it switches to
kernelgap by changing the program it names: `runner launch ARGS` (a C++ runner's command line),
`runner run` (a JSON request on stdin, one JSON answer on stdout, exit 0 either way) and
`runner run PTX_FILE REQUEST.json RESULT.json` (the PTX from a file, the answer written to a
file, exit 1 on error). All three hand the launch to the per-user launch service
(runner.launch.local_service) unless `--no-service`, and launch in this process where no service
can be had.

`runner launch ARGS`: the C++ runner's command line, read as that runner reads it.

The arguments are taken in the C++ runner's order and with its words (an unknown option, a
missing value, a bad parameter stop the scan where they stand; then the PTX file, `--kernel`, at
least one `--param`, the output parameter; then the file is read), so a compiler's test suite
sees the same output, the same `Error: ...` lines and the same exit status 1 whichever program it
calls. kernelgap's own options: `--timeout-s S` (a hung kernel is ended after S seconds) and
`--no-service` (launch in this process, with a context of its own, instead of through the
per-user launch service, runner.launch.local_service). Standard library only: what a launch
through the service costs is this module, a socket and one answer; a launch here has the driver
brought up in a thread while it imports and checks the rest (runner.gpu.driver_start).
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import sys
from dataclasses import dataclass, field

from protocol.progress import visible
from runner.errors import FileRefused, LaunchArgumentError, Refused, Unavailable
from runner.launch.launch_plan import encode_float

# ---- the C++ runner's values and answers --------------------------------------------------------

TYPES = ("i32", "u32", "i64", "u64", "f32", "f64")  # runner.launch.run_request.DTYPES' keys


def parse_dims(text: str, option: str) -> list[int]:
    """X,Y,Z; the C++ runner's message otherwise (it does not name the option)."""
    parts = text.split(",")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise LaunchArgumentError(f"expected 3 comma-separated values, got: {text}")
    return [int(p) for p in parts]


def _number(token: str, kind: str, text: str):
    token = token.strip()
    try:
        if kind[0] in "iu":
            return int(token, 0)
        value = float(token)
    except ValueError:
        what = "integer" if kind[0] in "iu" else "float"
        raise LaunchArgumentError(f"invalid {what} value '{token}' in --param {text}") from None
    return value if math.isfinite(value) else encode_float(value)


def parse_param(text: str) -> dict:
    """`T:V` or `T[]:V,V,...` as a run-request parameter."""
    kind, sep, values = text.partition(":")
    if not sep:
        raise LaunchArgumentError(
            f"--param requires type prefix (e.g. i64:42 or f64[]:1.0,2.0), got: {text}"
        )
    if not values:
        raise LaunchArgumentError(f"--param requires at least one value, got: {text}")
    base = kind.removesuffix("[]")
    if base not in TYPES:
        raise LaunchArgumentError(
            f"unsupported param type '{kind}' (expected one of {', '.join(TYPES)}, or T[])"
        )
    tokens = values.split(",")
    if kind.endswith("[]"):
        return {"type": kind, "values": [_number(t, base, text) for t in tokens]}
    if len(tokens) != 1:
        raise LaunchArgumentError(f"scalar param expects exactly one value, got: {text}")
    return {"type": kind, "value": _number(tokens[0], base, text)}


def format_values(values: list) -> str:
    """One line as the C++ runner prints it: %.17g for floats, integers unchanged."""
    out = []
    for v in values:
        if isinstance(v, str):  # "nan", "inf", "-inf" as JSON carries them
            out.append(v)
        elif isinstance(v, float):
            out.append(format(v, ".17g"))
        else:
            out.append(str(v))
    return ",".join(out)


def _say_error(answer: dict) -> None:
    error = visible(f"{answer['phase']}: {answer['error']}", lines=True)
    print(f"Error: {error}", file=sys.stderr, flush=True)


def _timed_out(answer: dict) -> None:
    _say_error(answer)
    os._exit(1)  # a hung kernel cannot be cancelled: ending the process frees the GPU


def report(answer: dict, stdout) -> int:
    """Print an answer as the C++ runner prints its outcome: the output line (status 0), or
    `Error: ...` on stderr (status 1)."""
    if answer.get("status") != "ok":
        _say_error(answer)
        return 1
    outputs = answer.get("outputs") or [{}]
    if "values" not in outputs[0]:  # the one output a command line asks for, as values
        _say_error({"phase": "launch", "error": "the answer holds no output values"})
        return 1
    stdout.write(format_values(outputs[0]["values"]) + "\n")
    stdout.flush()
    return 0


def run(document: dict, stdout) -> int:
    """Launch in this process (a context of its own) and report it. A request that
    runner.launch.launch_plan.quick takes goes straight to the launch, without numpy or the schema
    check; any other gets the full check (runner.launch.oneshot), which words the error."""
    from runner.launch import fresh_context, launch_plan

    request = launch_plan.quick(document)
    if request is None:
        from runner.launch import oneshot

        return report(oneshot.handle(document, on_timeout=_timed_out), stdout)
    return report(fresh_context.execute(request, _timed_out), stdout)


# ---- `runner launch`: the C++ runner's command line ---------------------------------------------

USAGE = (
    "Usage: python -m runner launch kernel.ptx --kernel NAME [--param i64[]:V,...] "
    "[--param f64[]:V,...] [--param i64:V] [--param f64:V] [--grid X,Y,Z] [--block X,Y,Z] "
    "[--output-param N] [--output-count N] [--timeout-s S] [--no-service]"
)
DEFAULT_TIMEOUT_S = 60.0
OPTIONS = ("--kernel", "--param", "--grid", "--block", "--output-param", "--output-count",
           "--timeout-s", "--no-service")  # fmt: skip


@dataclass
class Arguments:
    ptx_file: str | None = None
    kernel: str | None = None
    params: list[dict] = field(default_factory=list)
    param_texts: list[str] = field(default_factory=list)
    grid: list[int] = field(default_factory=lambda: [1, 1, 1])
    block: list[int] = field(default_factory=lambda: [1, 1, 1])
    output_param: int = 0
    output_count: int = -1  # all
    timeout_s: float = DEFAULT_TIMEOUT_S
    service: bool = True


def _int_arg(text: str, option: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise Refused(f"Error: {option} expects an integer, got: {text}") from None


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < 1e7:  # a timer longer than months is a typo; nan fails too
        raise Refused(f"Error: --timeout-s expects seconds above 0, got: {text}")
    return value


def parse(argv: list[str]) -> Arguments:
    """The arguments, or Refused with the C++ runner's message for the first problem."""
    args = Arguments()
    i = 0
    while i < len(argv):
        arg = argv[i]

        def value(option: str = arg) -> str:
            nonlocal i
            i += 1
            if i >= len(argv):
                raise Refused(f"Error: {option} requires a value")
            return argv[i]

        try:
            if arg == "--param":
                text = value()
                args.params.append(parse_param(text))
                args.param_texts.append(text)
            elif arg == "--grid":
                args.grid = parse_dims(value(), "--grid")
            elif arg == "--block":
                args.block = parse_dims(value(), "--block")
            elif arg == "--output-param":
                args.output_param = _int_arg(value(), "--output-param")
            elif arg == "--output-count":
                args.output_count = _int_arg(value(), "--output-count")
            elif arg == "--kernel":
                args.kernel = value()
            elif arg == "--timeout-s":
                args.timeout_s = _timeout(value())
            elif arg == "--no-service":
                args.service = False
            elif arg.startswith("-"):
                raise Refused(f"Error: unknown option {arg}")
            else:
                args.ptx_file = arg
        except LaunchArgumentError as exc:
            raise Refused(f"Error: {exc}") from None
        i += 1
    if args.ptx_file is None:
        raise Refused(USAGE)
    if args.kernel is None:
        raise Refused("Error: --kernel NAME is required")
    if not args.params:
        raise Refused("Error: at least one --param is required")
    if not 0 <= args.output_param < len(args.params):
        raise Refused(
            f"Error: output-param {args.output_param} out of range (have {len(args.params)} params)"
        )
    if not args.params[args.output_param]["type"].endswith("[]"):
        raise Refused(f"Error: output-param {args.output_param} is a scalar (cannot read back)")
    return args


def request(args: Arguments, ptx_text: str) -> dict:
    """The run request (schemas/run-request.schema.json) the arguments describe."""
    output = {"param": args.output_param}
    if args.output_count >= 0:
        output["count"] = args.output_count
    return {
        "ptx": ptx_text,
        "kernel": args.kernel,
        "grid": args.grid,
        "block": args.block,
        "params": args.params,
        "outputs": [output],
        "timeout_s": args.timeout_s,
    }


def main(argv: list[str]) -> int:
    """Run one launch as the C++ runner would; its exit status."""
    try:
        args = parse(argv)
        try:
            with open(args.ptx_file, encoding="utf-8") as file:
                ptx_text = file.read()
        except OSError as exc:
            raise Refused(f"Error: cannot open {args.ptx_file}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise Refused(f"Error: {args.ptx_file} is not UTF-8 text (PTX is text)") from None
    except Refused as exc:
        print(visible(exc, lines=True), file=sys.stderr, flush=True)
        return 1
    document = request(args, ptx_text)
    if args.service:
        from runner.launch import local_service

        try:
            answer = local_service.ask(document)
        except Unavailable as exc:
            print(f"kernelgap: launch service unavailable ({exc}); launching here", file=sys.stderr)
        else:
            return report(answer, sys.stdout)
    from runner.gpu import driver_start
    from runner.launch.fresh_context import private_stdout

    driver_start.start()  # begun by runner.__main__ for --no-service; here for a service refused
    return run(document, io.TextIOWrapper(private_stdout(), encoding="utf-8"))


# ---- `runner run`: the JSON runners -----------------------------------------------------------

RUN_USAGE = "Usage: python -m runner run [--no-service] [PTX_FILE REQUEST.json RESULT.json]"
# What a request file may leave out (the request-file runner's defaults); its PTX is the file's.
FILE_DEFAULTS = {"grid": [1, 1, 1], "block": [1, 1, 1], "params": [], "outputs": []}


def run_main(argv: list[str]) -> int:
    """`runner run [--no-service]`: a request on stdin, its answer on stdout, exit 0 whenever an
    answer was written; with PTX_FILE REQUEST.json RESULT.json: the answer in RESULT.json, exit 0
    ok and 1 on any error. Exit 2: the command line itself is wrong."""
    service = "--no-service" not in argv
    files = [a for a in argv if a != "--no-service"]
    if len(files) not in (0, 3) or any(a.startswith("-") for a in files):
        print(f"{RUN_USAGE}\nError: expected no arguments or three files, got: {' '.join(argv)}",
              file=sys.stderr)  # fmt: skip
        return 2
    if files:
        return _run_files(*files, service=service)
    return _run_stdin(service)


def _through_service(request: dict) -> dict | None:
    """The service's answer to `request`, or None where there is no service (launch here)."""
    import orjson

    from runner.launch import local_service

    try:
        answer = local_service.ask_line(orjson.dumps(request), local_service.deadline_s(request))
    except Unavailable as exc:
        print(f"kernelgap: launch service unavailable ({exc}); launching here", file=sys.stderr)
        return None
    except (TypeError, ValueError):  # not encodable again: the full check here words why
        return None
    if "id" not in request:
        answer.pop("id", None)  # the service echoes an id; this answer is a one-shot's
    return answer


def _run_stdin(service: bool) -> int:
    import orjson

    from protocol.input_files import MAX_REQUEST_BYTES
    from runner.launch.fresh_context import private_stdout

    stdout = private_stdout()
    raw = sys.stdin.buffer.read(MAX_REQUEST_BYTES + 1)
    request = None
    if len(raw) <= MAX_REQUEST_BYTES:  # else, and where it is no JSON, the full check words it
        with contextlib.suppress(orjson.JSONDecodeError):
            request = orjson.loads(raw)
    if isinstance(request, dict):
        answer = _through_service(request) if service else None
        if answer is not None:
            stdout.write(orjson.dumps(answer) + b"\n")
            stdout.flush()
            return 0
        if _launched_here(request, stdout, lambda response: 0) is not None:
            return 0
    from runner.launch import oneshot

    return oneshot.main(io.BytesIO(raw), stdout, status=lambda response: 0)


def _launched_here(request: dict, out, status) -> int | None:
    """Launch `request` in this process when the quick check takes it (no numpy, no jsonschema:
    as `runner launch --no-service` does) and write its answer to `out`; the exit status, or
    None where the full check (runner.launch.oneshot) must judge the request."""
    import base64
    import binascii

    from runner.launch import fresh_context, launch_plan

    quick = {"timeout_s": 60.0, **request}  # run_request's default, as the full check has it
    if type(quick["timeout_s"]) is int:
        quick["timeout_s"] = float(quick["timeout_s"])
    if "ptx_base64" in quick and "ptx" not in quick:
        try:
            quick["ptx"] = base64.b64decode(quick.pop("ptx_base64"), validate=True).decode()
        except (binascii.Error, ValueError, TypeError):
            return None
    prepared = launch_plan.quick(quick)
    if prepared is None:
        return None
    answer = fresh_context.SingleAnswer(out, status)
    response = fresh_context.execute(prepared, answer.timeout_and_exit)
    answer.write(response)
    return status(response)


def file_request(ptx_file: str, request_file: str) -> dict:
    """The run request of the request-file form: the request file's fields over FILE_DEFAULTS,
    with the PTX file's text (its trailing NUL bytes, as warpforthc writes them, removed)."""
    import orjson

    from protocol.input_files import MAX_REQUEST_BYTES

    try:
        ptx = _read_file(ptx_file, "the PTX", MAX_REQUEST_BYTES).rstrip(b"\0").decode("utf-8")
    except UnicodeDecodeError:
        raise FileRefused(f"{ptx_file}: not UTF-8 text (PTX is text)") from None
    if not ptx.strip():
        raise FileRefused(f"{ptx_file}: empty (expected PTX text)")
    raw = _read_file(request_file, "the request", MAX_REQUEST_BYTES)
    try:
        request = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise FileRefused(f"{request_file}: not a JSON run request ({exc})") from None
    if not isinstance(request, dict):
        raise FileRefused(
            f"{request_file}: expected a JSON object (a run request), got {type(request).__name__}"
        )
    for key in ("ptx", "ptx_base64"):
        if key in request:
            raise FileRefused(
                f"{request_file}: {key}: the PTX comes from {ptx_file}; leave `ptx` and "
                "`ptx_base64` out of the request file"
            )
    return {**FILE_DEFAULTS, **request, "ptx": ptx}


def _read_file(path: str, what: str, limit: int) -> bytes:
    try:
        with open(path, "rb") as file:
            data = file.read(limit + 1)
    except OSError as exc:
        raise FileRefused(f"{path}: cannot read {what}: {exc.strerror}") from None
    if len(data) > limit:
        raise FileRefused(f"{path}: {what} is larger than {limit} bytes")
    return data


def _run_files(ptx_file: str, request_file: str, result_file: str, *, service: bool) -> int:
    from runner.launch import fresh_context

    class ResultFile:
        """The answer's one write, whole, to RESULT.json (stdout stays free)."""

        written = False

        def write(self, data: bytes) -> None:
            try:
                with open(result_file, "wb") as out:
                    out.write(data)
                self.written = True
            except OSError as exc:
                print(f"Error: cannot write {result_file}: {exc.strerror}", file=sys.stderr)

        def flush(self) -> None:
            pass

    result = ResultFile()

    def status(answer: dict) -> int:
        if answer.get("status") != "ok":
            print(visible(f"Error: {answer.get('phase')}: {answer.get('error')}", lines=True),
                  file=sys.stderr, flush=True)  # fmt: skip
        return 0 if answer.get("status") == "ok" and result.written else 1

    try:
        request = file_request(ptx_file, request_file)
    except FileRefused as exc:
        answer = fresh_context.error_document("input", str(exc))
    else:
        answer = _through_service(request) if service else None
        if answer is None:
            launched = _launched_here(request, result, status)
            if launched is not None:
                return launched
            from runner.launch import oneshot

            return oneshot.respond(lambda: request, result, status)
    import orjson

    result.write(orjson.dumps(answer) + b"\n")
    return status(answer)
