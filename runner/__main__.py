"""`python -m runner ...` and the installed `kernelgap-runner`. `serve` and `launch` go straight
to their modules: the service's worker (the CUDA context) starts before click and the other
commands' modules are imported, and a launch imports only what it needs (through the per-user
service, runner.launch.local_service, only the standard library), which is most of what a test
suite calling a runner per test pays for."""

import atexit
import os
import sys


def main(prog_name: str | None = None) -> None:
    if sys.argv[1:2] == ["serve"]:  # its options are parsed by runner.launch.serve itself
        from runner.launch.serve import run

        sys.exit(run())
    if sys.argv[1:2] == ["launch"] and not {"-h", "--help"} & set(sys.argv[2:]):
        from runner.launch.launch_command import main as launch

        status = launch(sys.argv[2:])
        # a launch has said all it has to say: run the exit hooks, then skip the interpreter's
        # teardown of its modules (cuda.bindings' cost a process per launch about 20 ms); the
        # driver frees what is left when the process ends, as it does for any process
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    from runner.cli import main as commands

    commands(prog_name=prog_name)


if __name__ == "__main__":
    main(prog_name="python -m runner")
