"""The `python -m harness` subcommands, one module per area."""
