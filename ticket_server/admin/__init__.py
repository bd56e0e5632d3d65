"""Operator commands: callers, audit reports, the tool contract, export, probe, seeding
and the sample generator. They import the runtime; the runtime never imports them."""


class CommandError(Exception):
    """A failure the operator fixes: printed by the CLI as one line, exit status 2."""
