"""A quiet start for the command-line entry points.

TensorFlow writes several lines to stderr while it loads (the oneDNN
notice, "Could not find cuda drivers", absl's "All log messages before
absl::InitializeLog() ..."), and on a machine without a GPU an `E` line
about `cuInit` when it first looks for devices; gensim logs every step
of a word2vec training at INFO. None of it is a problem, all of it looks
like one. `quiet_start` runs before a command imports either library:

  - it sets `TF_CPP_MIN_LOG_LEVEL=3` (TensorFlow's C++ log level) unless
    the environment asks for TensorFlow's info or warning lines (0 or 1);
    2, "errors only", is raised to 3 too, since the `cuInit` line of a
    machine without a GPU is logged as an error;
  - it leaves TensorFlow unimported, so a command checks its arguments
    first (a typo is refused in a fraction of a second, not after the
    seconds TensorFlow takes to load), and hooks its first import: that
    runs with stderr captured, and every captured line is written back
    except the informational and warning lines of the load (the level
    above does not reach lines logged before absl's logging is
    initialised);
  - it sets the loggers of gensim, absl and TensorFlow's Python side to
    WARNING (their INFO lines: word2vec's progress, checkpoint sharding
    times, "Assets written to").

`verbose=True` (`--verbose`) changes nothing; `TF_CPP_MIN_LOG_LEVEL` of 0
or 1 in the environment leaves TensorFlow's C++ output as it is.
"""

import importlib.abc
import importlib.util
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
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL") in ("0", "1") or "tensorflow" in sys.modules:
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    if not any(isinstance(finder, _QuietImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _QuietImport())


class _QuietImport(importlib.abc.MetaPathFinder):
    """An import hook: TensorFlow's first import runs with stderr filtered
    (`_LOAD_NOISE`); every other import is left to the usual finders."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)  # once: the usual finders find the package
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _FilteredLoader(spec.loader)
        return spec


class _FilteredLoader(importlib.abc.Loader):
    """`loader`, with its package's code run under `_stderr_filtered`."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        with _stderr_filtered(_LOAD_NOISE):
            self.loader.exec_module(module)

    def __getattr__(self, name):  # the rest of the loader's interface (resources, source)
        return getattr(self.loader, name)


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
