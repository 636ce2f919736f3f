"""`runner launch ARGS`: the C++ runner's command line, read as that runner reads it.

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

import io
import sys
from dataclasses import dataclass, field

from protocol.terminal_text import visible
from runner.launch import cli_compat

USAGE = (
    "Usage: python -m runner launch kernel.ptx --kernel NAME [--param i64[]:V,...] "
    "[--param f64[]:V,...] [--param i64:V] [--param f64:V] [--grid X,Y,Z] [--block X,Y,Z] "
    "[--output-param N] [--output-count N] [--timeout-s S] [--no-service]"
)
DEFAULT_TIMEOUT_S = 60.0
OPTIONS = ("--kernel", "--param", "--grid", "--block", "--output-param", "--output-count",
           "--timeout-s", "--no-service")  # fmt: skip


class Refused(Exception):
    """The command line cannot be run; `str()` is the line the C++ runner prints."""


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
                args.params.append(cli_compat.parse_param(text))
                args.param_texts.append(text)
            elif arg == "--grid":
                args.grid = cli_compat.parse_dims(value(), "--grid")
            elif arg == "--block":
                args.block = cli_compat.parse_dims(value(), "--block")
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
        except cli_compat.LaunchArgumentError as exc:
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
        except local_service.Unavailable as exc:
            print(f"kernelgap: launch service unavailable ({exc}); launching here", file=sys.stderr)
        else:
            return cli_compat.report(answer, sys.stdout)
    from runner.gpu import driver_start
    from runner.launch.private_stdout import private_stdout

    driver_start.start()  # begun by runner.__main__ for --no-service; here for a service refused
    return cli_compat.run(document, io.TextIOWrapper(private_stdout(), encoding="utf-8"))
