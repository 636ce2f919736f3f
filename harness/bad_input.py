"""BadInput: the one error every harness command gives for bad input or a run that could not
give a document: exit status 2 and `error: <message>` on stderr, the message safe to print
(it may quote names from a document)."""

from __future__ import annotations

import click

from harness.escaping import terminal

__all__ = ["BadInput"]


class BadInput(click.ClickException):
    exit_code = 2

    def show(self, file=None):
        click.echo(f"error: {terminal(self.message, lines=True)}", err=True)
