"""`common.startup`: commands start without TensorFlow's and gensim's noise."""

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from common import startup

ROOT = Path(__file__).resolve().parents[2]
ABSL_LINE = re.compile(r"^[IWEF]\d{4} ", re.MULTILINE)


def test_the_filter_drops_load_noise_and_keeps_every_other_line(capfd):
    noise = (
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
        "I0000 00:00:1795490814.343497    3953 port.cc:153] oneDNN custom operations are on.\n"
        "W0000 00:00:1795490816.834088    3953 cudart_stub.cc:31] Could not find cuda drivers\n"
    )
    kept = "E0000 00:00:1795490818.615490    3953 loader.cc:52] a real failure\nTraceback: something else\n"
    with startup._stderr_filtered(startup._LOAD_NOISE):
        # Written to the file descriptor, as C++ code does.
        os.write(2, (noise + kept).encode())
    assert capfd.readouterr().err == kept


def _start(code, **environment):
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**env, **environment},
                          capture_output=True, text=True, timeout=300, check=True)


@pytest.mark.parametrize("level", [None, "2"])
def test_a_quiet_start_prints_no_tensorflow_lines(level):
    # TensorFlow is not imported by quiet_start (a command checks its arguments first), and its import,
    # whenever it comes, prints nothing: neither its load's lines nor, at 2 ("errors only", common advice),
    # the cuInit error of a machine without a GPU.
    code = ("import sys; from common.startup import quiet_start; quiet_start(); print('tensorflow' in sys.modules); "
            "import tensorflow as tf; tf.config.list_physical_devices(); print(tf.reduce_sum(tf.ones([3])).numpy())")
    result = _start(code, **({"TF_CPP_MIN_LOG_LEVEL": level} if level else {}))
    assert result.stdout.split() == ["False", "3.0"]
    assert not ABSL_LINE.search(result.stderr) and "absl::InitializeLog" not in result.stderr, result.stderr


def test_the_environment_variable_is_respected():
    # A user who asks for TensorFlow's info or warning lines (0 or 1) gets them: no capture, no change.
    code = "import os; from common.startup import quiet_start; quiet_start(); print(os.environ['TF_CPP_MIN_LOG_LEVEL'])"
    assert _start(code, TF_CPP_MIN_LOG_LEVEL="1").stdout.strip() == "1"


def test_library_info_lines_are_hidden_unless_verbose():
    loggers = [logging.getLogger(name) for name in ("gensim", "absl", "tensorflow")]
    levels = [logger.level for logger in loggers]
    try:
        for logger in loggers:
            logger.setLevel(logging.NOTSET)
        startup.quiet_start(verbose=True)
        assert [logger.level for logger in loggers] == [logging.NOTSET] * 3
        startup.quiet_start()
        assert [logger.level for logger in loggers] == [logging.WARNING] * 3
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
