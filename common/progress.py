"""Progress bars for the long steps of every command (tqdm).

A bar is drawn only on a terminal: when stderr is a file or a pipe (CI
logs, `nohup`), bars are silent and the commands' log lines are all there
is. `--quiet` (every command) silences them on a terminal too; the command
line entry points call `set_quiet` (see `common.errors.run_command`).
"""

import sys

from tqdm import tqdm

_quiet = False


def set_quiet(quiet):
    global _quiet
    _quiet = bool(quiet)


def bar(iterable=None, *, total=None, desc=None, unit="it", leave=False, initial=0):
    """A tqdm bar on stderr, disabled unless stderr is a terminal and the
    command is not `--quiet`.

    Args:
      iterable: optional iterable to wrap.
      total: the number of units (default: len(iterable)).
      desc: what is being done, e.g. "encoding captions".
      unit: what is counted ("pair", "image", "caption", ...); tqdm shows
        its rate (units/s) and the remaining time.
      leave: keep the finished bar on screen (one line per training epoch)
        instead of clearing it (the sub-steps of a command).
      initial: units already done (a resumed epoch).
    """
    return tqdm(iterable, total=total, desc=desc, unit=unit, leave=leave, initial=initial, file=sys.stderr,
                disable=True if _quiet else None, dynamic_ncols=True, smoothing=0.1)
