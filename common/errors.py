"""The one exception type for bad user input (files, arguments, captions).

Command-line entry points catch it and print its message as a single line
before exiting with status 2, so every message must name the file or the
argument at fault and say what is wrong with it. Their argument parsers
(`ArgumentParser`) say what is wrong with the arguments the same way: one
line, `error: <message>`, and status 2.
"""

import argparse


class InputError(Exception):
    """A user-facing, one-line description of bad input."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose errors (an unknown option, a missing or bad
    value) are one `error: ...` line and status 2, as `run_command`'s
    (argparse's own print the usage, then `PROG: error: ...`)."""

    def error(self, message):
        self.exit(2, f"error: {message}\n")


def count(text, minimum=1):
    """An argparse type: an integer of at least `minimum` (1 by default)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer; got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be at least {minimum}; got {value}")
    return value


def count_or_zero(text):
    """An argparse type: an integer of at least 0."""
    return count(text, 0)


# The lines of a TensorFlow error's message that say where it happened, not what is wrong.
TENSORFLOW_TRACE_LINES = ("Graph execution error", "Detected at node", "<stack traces", "[[")


def error_reason(error, limit=200):
    """The reason an exception gives, in one line of at most `limit`
    characters: the first line of its message that says what is wrong (not
    TensorFlow's graph-execution preamble, node or stack lines), without
    TensorFlow's node names and op tags, and for "<file>; <reason>" the
    reason only (e.g. "File too large" from a failed checkpoint write); the
    exception's type name when its message says nothing."""
    import re

    message = str(getattr(error, "message", None) or error)
    message = re.sub(r"\{\{[^}]*\}\}\s*|\s*\[Op:\w+\]", "", message)
    lines = [line.strip() for line in message.splitlines()]
    said = [line for line in lines if line and not line.startswith(TENSORFLOW_TRACE_LINES)]
    return said[0].rsplit("; ", 1)[-1][:limit] if said else type(error).__name__


def run_command(body, args):
    """Runs a command-line entry point's body and returns its exit status:
    an `InputError` (bad input) or an `OSError` (the environment: a full
    disk, a permission) becomes `error: <message>` on stderr and status 2;
    Ctrl-C (`KeyboardInterrupt`) becomes `interrupted[: <what was kept>]`
    and status 130.

    `args.quiet` (when the command has `--quiet`) turns progress bars off;
    log lines are routed around the bars so they do not break them.
    TensorFlow and gensim start quietly (`common.startup`) unless
    `args.verbose` (when the command has `--verbose`)."""
    import logging
    import sys

    from tqdm.contrib.logging import logging_redirect_tqdm

    from common import progress, startup

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    progress.set_quiet(getattr(args, "quiet", False))
    startup.quiet_start(getattr(args, "verbose", False))
    try:
        with logging_redirect_tqdm():
            return body(args)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # the environment: a full disk, permissions, a vanished file
        print(f"error: {error.filename + ': ' if error.filename else ''}{error.strerror or error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interrupt:  # Ctrl-C: what was kept, from the command if it knows
        print(f"interrupted{': ' + str(interrupt) if str(interrupt) else ''}", file=sys.stderr)
        return 130
