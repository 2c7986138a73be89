"""The one exception type for bad user input (files, arguments, captions).

Command-line entry points catch it and print its message as a single line
before exiting with status 2, so every message must name the file or the
argument at fault and say what is wrong with it.
"""


class InputError(Exception):
    """A user-facing, one-line description of bad input."""
