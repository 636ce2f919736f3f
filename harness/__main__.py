from harness.cli import main

main(prog_name="python -m harness")
