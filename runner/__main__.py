"""`python -m runner ...`. `serve` on its own goes straight to the service: its worker (the CUDA
context) starts before click and the other commands' modules are imported, which is most of the
time to a first answer that the supervisor can save."""

import sys

if sys.argv[1:2] == ["serve"]:  # its options are parsed by runner.launch.serve itself
    from runner.launch.serve import run

    sys.exit(run())

from runner.cli import main

main(prog_name="python -m runner")
