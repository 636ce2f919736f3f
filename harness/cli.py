"""`python -m harness`: run the suite remotely, keep history, compare, alert, export."""

from __future__ import annotations

import importlib

import click

# (module under harness.commands, click command names it defines); written by area.
COMMANDS = {
    "run": ("run",),
    "history": ("ingest", "history", "regressions"),
    "changes": ("changes",),
    "pr": ("pr",),
    "compare": ("compare", "summary", "export"),
    "dashboard": ("dashboard",),
    "explain": ("explain",),
}


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main():
    """kernelgap harness: host side of the benchmark (never touches CUDA).

    Documents go to stdout; progress and logs go to stderr.
    """


for module_name, names in COMMANDS.items():
    try:
        module = importlib.import_module(f"harness.commands.{module_name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"harness.commands.{module_name}":
            raise
        continue
    for name in names:
        main.add_command(getattr(module, name))
