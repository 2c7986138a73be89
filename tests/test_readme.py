"""README.md: short enough to read, and its Python snippet runs as written
from any folder and shows what it computes."""

import contextlib
import io
import re

import numpy as np
import tensorflow as tf

from data.embedded import EMBEDDED_DATA
from tests.helpers import REPO

README = REPO / "README.md"
MOST_LINES = 250


def test_the_readme_has_at_most_250_lines():
    lines = len(README.read_text().splitlines())
    assert lines <= MOST_LINES, f"README.md has {lines} lines; at most {MOST_LINES}: move detail into docs/"


def test_the_python_snippet_prints_its_scores_from_any_folder(trained, tmp_path, monkeypatch):
    (snippet,) = re.findall(r"^```python\n(.*?)^```$", README.read_text(), re.M | re.S)
    # A folder outside the repository where the quick start ran: its runs/gru-quick.
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "gru-quick").symlink_to(trained)
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(snippet, "README.md", "exec"), {})
    model = tf.saved_model.load(str(trained / "saved_model"))
    features = np.load(f"{EMBEDDED_DATA}/test_ims.npy")[:4].astype("float32")
    expected = model.score(features, tf.constant(["A dog runs through the snow .", "Two children play on a beach"]))
    numbers = [float(number) for number in re.findall(r"-?\d+\.\d*(?:e[-+]?\d+)?", printed.getvalue())]
    np.testing.assert_allclose(np.reshape(numbers, (4, 2)), expected.numpy(), atol=1e-6)
