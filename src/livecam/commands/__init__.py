"""Application functions behind the CLI commands: one module per command."""
