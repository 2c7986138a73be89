"""A quiet start for the command-line entry points.

TensorFlow writes several lines to stderr while it loads (the oneDNN
notice, "Could not find cuda drivers", absl's "All log messages before
absl::InitializeLog() ..."), and on a machine without a GPU an `E` line
about `cuInit` when it first looks for devices; gensim logs every step
of a word2vec training at INFO. None of it is a problem, all of it looks
like one. `quiet_start` runs before a command imports either library:

  - it sets `TF_CPP_MIN_LOG_LEVEL=3` (TensorFlow's C++ log level) unless
    the environment already sets it;
  - it imports TensorFlow with stderr captured, and writes back every
    captured line except the informational and warning lines of that
    load (the level above does not reach lines logged before absl's
    logging is initialised);
  - it sets the loggers of gensim, absl and TensorFlow's Python side to
    WARNING (their INFO lines: word2vec's progress, checkpoint sharding
    times, "Assets written to").

`verbose=True` (`--verbose`) changes nothing; `TF_CPP_MIN_LOG_LEVEL`
set in the environment leaves TensorFlow's C++ output as it is.
"""

import importlib
import logging
import os
import re
import sys
import tempfile

# "I0000 00:00:1795490814.343497    3953 port.cc:153] ..." (absl's format,
# severity I or W) and absl's notice about logging before its set-up.
_LOAD_NOISE = re.compile(r"[IW]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\]|WARNING: All log messages before absl::InitializeLog\(\)")


def quiet_start(verbose=False):
    if verbose:
        return
    for name in ("gensim", "absl", "tensorflow"):
        logging.getLogger(name).setLevel(logging.WARNING)
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ or "tensorflow" in sys.modules:
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    with _stderr_filtered(_LOAD_NOISE):
        importlib.import_module("tensorflow")


class _stderr_filtered:
    """Captures file descriptor 2 (C++ code writes there, not to
    `sys.stderr`) and, on exit, writes back the lines that do not match
    `pattern` at their start."""

    def __init__(self, pattern):
        self.pattern = pattern

    def __enter__(self):
        sys.stderr.flush()
        self.capture = tempfile.TemporaryFile()
        self.saved = os.dup(2)
        os.dup2(self.capture.fileno(), 2)

    def __exit__(self, *exc_info):
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.capture.seek(0)
        lines = self.capture.read().decode(errors="replace").splitlines(keepends=True)
        self.capture.close()
        sys.stderr.write("".join(line for line in lines if not self.pattern.match(line)))
        sys.stderr.flush()
