"""Subcommands of the ``harness`` CLI, one module each."""
