"""`python -m harness`: run the suite remotely, keep history, compare, alert, export.

A command's module is imported when that command runs (or when help lists them all), so one
`harness ingest` per file does not pay for the dashboard, the analysis and the transports.
"""

from __future__ import annotations

import importlib
import importlib.util

import click

from protocol.input_files import os_error_line
from protocol.progress import visible
from protocol.version import version_option

# (module under harness.commands, click command names it defines); written by area.
COMMANDS = {
    "run": ("run",),
    "ingest": ("ingest",),
    "history": ("history", "regressions"),
    "changes": ("changes",),
    "pr": ("pr",),
    "compare": ("compare", "summary", "export"),
    "dashboard": ("dashboard",),
    "explain": ("explain",),
    "robust": ("robust",),
}

# The packages an extra brings that a command imports when it runs, by the extra's name.
EXTRA_OF_MODULE = {"scipy": "harness", "plotly": "harness", "ruptures": "harness", "vastai": "vast"}


class LazyGroup(click.Group):
    """A click group whose commands are imported from COMMANDS' modules when first looked up;
    `commands` (every command) imports them all, as help and the tests that walk them need."""

    def __init__(self, *args, **kwargs):
        self._modules = {name: module for module, names in COMMANDS.items() for name in names}
        super().__init__(*args, **kwargs)

    @property
    def commands(self) -> dict[str, click.Command]:
        for name in list(self._modules):
            self._load(name)
        return self._loaded

    @commands.setter
    def commands(self, value) -> None:
        self._loaded = dict(value or {})

    def _load(self, name: str) -> click.Command | None:
        module_name = self._modules.pop(name, None)
        if module_name is not None:
            try:
                module = importlib.import_module(f"harness.commands.{module_name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"harness.commands.{module_name}":
                    raise
                return None
            self._loaded[name] = getattr(module, name)
        return self._loaded.get(name)

    def invoke(self, ctx):
        """A missing extra or a file the command could not read or write: one line, exit 2."""
        try:
            return super().invoke(ctx)
        except ModuleNotFoundError as exc:
            extra = EXTRA_OF_MODULE.get((exc.name or "").partition(".")[0])
            if extra is None:
                raise
            line = (
                f"harness {ctx.invoked_subcommand} needs the [{extra}] extra ({exc.name} is not "
                f"installed): pip install '.[{extra}]' in a checkout, "
                f"'kernelgap-<version>-py3-none-any.whl[{extra}]' from a wheel, or "
                f"'kernelgap[{extra}] @ git+<URL>@<tag>' from git"
            )
        except OSError as exc:
            line = os_error_line(exc)
            if line is None:
                raise
        click.echo(f"error: {visible(line)}", err=True)
        ctx.exit(2)

    def get_command(self, ctx, cmd_name: str) -> click.Command | None:
        return self._load(cmd_name)

    def list_commands(self, ctx) -> list[str]:
        present = (
            n
            for n, m in self._modules.items()
            if importlib.util.find_spec(f"harness.commands.{m}") is not None
        )
        return sorted({*self._loaded, *present})


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@version_option("harness")
def main():
    """kernelgap harness: host side of the benchmark (never touches CUDA).

    Documents go to stdout; progress and logs go to stderr. Also installed as
    `kernelgap-harness`.

    \b
    Examples (cases.toml: a suite of yours; results/: where `run` saves documents):
      python -m harness run cases.toml --target ssh://me@gpu-box
      python -m harness summary results/RUN.json
      python -m harness compare results/BASE.json results/HEAD.json
    """
