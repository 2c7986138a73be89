"""The time a training run has spent, over every process that trained it.

A paper-length run on a CPU is stopped and resumed, perhaps several
times; each process that trains it is a piece. Each piece's command line,
wall time, CPU time (user + system, all threads), cores, CPU model and the
instruction set its kernels run on, 1-minute load average at its start and
at its latest write, and peak memory are kept in the model directory's
`time_spent.json`, rewritten (atomically) at every log line and
checkpoint, so a piece killed without warning loses at most the time since
its last log line. results.json reports the sum over the pieces, and the
command that started the run (its first piece's; a resumed piece's
`--resume` line is not how the run was made).
"""

import json
import logging
import resource
import time
from pathlib import Path

from common import machine
from common.errors import InputError
from common.files import read_text, write_json_atomically

FILE = "time_spent.json"

log = logging.getLogger("train")


class TimeSpent:
    """The pieces of one run: the earlier processes' (read from
    `model_dir`/time_spent.json when resuming) and this one's.

    Args:
      model_dir: the run's directory.
      resume: whether this process continues the run (a new run starts
        with no earlier pieces).
      command: this process's command line (None: not recorded).
    """

    def __init__(self, model_dir, resume, command=None):
        self.path = Path(model_dir) / FILE
        self.command = command
        self.earlier = _read_pieces(self.path) if resume else []
        if resume and not self.path.exists():
            log.warning("%s: absent (a run started before runs recorded it): the time of the earlier pieces is not "
                        "counted in results.json", self.path)
        self.start = time.monotonic()
        self.start_load = machine.load_average()

    def piece(self):
        """This process's piece so far."""
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "command": self.command,
            "wall_seconds": round(time.monotonic() - self.start, 1),
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
            "cores": machine.cores(),
            "cpu": machine.cpu_model(),
            "isa": str(machine.instruction_set()),
            "load_average": [self.start_load, machine.load_average()],
            "peak_memory_bytes": usage.ru_maxrss * 1024,  # ru_maxrss is in KiB on Linux
        }

    def save(self):
        """Writes every piece, this one as it stands now."""
        write_json_atomically(self.path, json.dumps({"pieces": [*self.earlier, self.piece()]}, indent=2) + "\n")

    def totals(self):
        """results.json's command and time fields: the command of the
        first piece (this process's when an earlier piece recorded none),
        wall and CPU time summed over the pieces, this process's cores, the
        CPUs and kernels' instruction sets of the pieces (each different
        one once, in order: a run resumed on another machine names both),
        the load at the first piece's start and now, the largest peak
        memory and the number of pieces."""
        pieces = [*self.earlier, self.piece()]
        return {
            "command": pieces[0].get("command") or self.command,
            "wall_seconds": round(sum(piece["wall_seconds"] for piece in pieces), 1),
            "cpu_seconds": round(sum(piece["cpu_seconds"] for piece in pieces), 1),
            "cores": pieces[-1]["cores"],
            "cpu": _distinct(pieces, "cpu"),
            "isa": _distinct(pieces, "isa"),
            "load_average": [pieces[0]["load_average"][0], pieces[-1]["load_average"][1]],
            "peak_memory_bytes": max(piece["peak_memory_bytes"] for piece in pieces),
            "pieces": len(pieces),
        }


def _distinct(pieces, key):
    """The different values of `key` over `pieces`, in order, joined by
    " and " (None when no piece recorded one: pieces written before runs
    recorded their machine)."""
    values = list(dict.fromkeys(piece[key] for piece in pieces if piece.get(key)))
    return " and ".join(values) or None


def _read_pieces(path):
    """The pieces recorded in `path` ([] when it does not exist); a
    malformed file is an InputError naming it."""
    if not path.exists():
        return []
    try:
        pieces = json.loads(read_text(path))["pieces"]
        for piece in pieces:
            if not all(isinstance(piece[key], (int, float)) for key in ("wall_seconds", "cpu_seconds", "peak_memory_bytes")):
                raise TypeError
            if len(piece["load_average"]) != 2:
                raise TypeError
    except (json.JSONDecodeError, KeyError, TypeError):
        raise InputError(f"{path}: not the record of a run's pieces that train.py writes; "
                         "was it edited? (delete it to count this process's time only)") from None
    return pieces
