from runner.cli import main

main(prog_name="python -m runner")
