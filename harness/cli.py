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
    "robust": ("robust",),
}


def _print_version(ctx, param, value) -> None:
    if not value or ctx.resilient_parsing:
        return
    from protocol.version import RESULT_SCHEMA_VERSION, package_version

    click.echo(f"kernelgap harness {package_version()} (result schema {RESULT_SCHEMA_VERSION})")
    ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Print the version and exit.",
)
def main():
    """kernelgap harness: host side of the benchmark (never touches CUDA).

    Documents go to stdout; progress and logs go to stderr. Also installed as
    `kernelgap-harness`.

    \b
    Examples:
      python -m harness run benchmarks/cases.toml --target ssh://me@gpu-box
      python -m harness compare results/base.json results/head.json
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
