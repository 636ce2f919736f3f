"""`python -m runner ...` and the installed `kernelgap-runner`. `serve`, `launch` and `run` go straight
to their modules: the service's worker (the CUDA context) starts before click and the other
commands' modules are imported, and a launch imports only what it needs (through the per-user
service, runner.launch.local_service, only the standard library), which is most of what a test
suite calling a runner per test pays for. `launch --no-service` begins the driver's start
(runner.gpu.driver_start) before anything else, so its imports and checks overlap it."""

import atexit
import os
import sys


def main(prog_name: str | None = None) -> None:
    helped = {"-h", "--help"} & set(sys.argv[2:])  # help is click's, as for every command
    if sys.argv[1:2] == ["serve"] and not helped:  # options parsed by runner.launch.serve itself
        from runner.launch.serve import run

        sys.exit(run())
    if sys.argv[1:2] in (["launch"], ["run"]) and not helped:
        if "--no-service" in sys.argv[2:]:
            # the driver's start (most of such a process's life) overlaps everything below
            from runner.gpu import driver_start

            driver_start.start()
        from runner.launch import launch_command

        command = launch_command.main if sys.argv[1] == "launch" else launch_command.run_main
        status = command(sys.argv[2:])
        # a launch has said all it has to say: run the exit hooks, then skip the interpreter's
        # teardown of its modules (cuda.bindings' cost a process per launch about 20 ms); the
        # driver frees what is left when the process ends, as it does for any process
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        _flush_c_stdio()
        os._exit(status)
    from runner.cli import main as commands

    commands(prog_name=prog_name)


def _flush_c_stdio() -> None:
    """Flush C's stdio, as exit() would and os._exit does not: the driver writes a kernel's
    printf there (file descriptor 1, which a launch points at stderr)."""
    ctypes = sys.modules.get("ctypes")  # loaded where the driver was; else there is nothing
    if ctypes is not None:
        import contextlib

        with contextlib.suppress(OSError, AttributeError):  # no C library to ask (not a Unix)
            ctypes.CDLL(None).fflush(None)


if __name__ == "__main__":
    main(prog_name="python -m runner")
