"""The one error type the engine raises for bad input: its message is a single line that names the culprit."""


class ForkError(Exception):
    """A user-facing failure: the CLI prints the message and exits non-zero, without a traceback."""
