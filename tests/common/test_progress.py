"""Progress bars: drawn on a terminal, silent in logs and with --quiet."""

import io
import re
import sys

import pytest

import evaluate
import train
from common import progress
from tests.conftest import TINY


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def terminal(monkeypatch):
    """A terminal as stderr, installed by calling the fixture's value in the
    test itself (pytest sets sys.stderr again between setup and call)."""
    stream = Terminal()

    def install():
        monkeypatch.setattr(sys, "stderr", stream)
        return stream

    yield install
    progress.set_quiet(False)


def bar_lines(text, prefix):
    return [line for line in re.split(r"[\r\n]", text) if line.startswith(prefix)]


def test_bars_only_on_a_terminal_and_not_when_quiet(monkeypatch):
    log = io.StringIO()  # a file or pipe: no bar
    monkeypatch.setattr(sys, "stderr", log)
    for _ in progress.bar(range(3), desc="work"):
        pass
    assert log.getvalue() == ""
    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    for _ in progress.bar(range(3), desc="work", unit="item"):
        pass
    assert "work" in screen.getvalue() and "item/s" in screen.getvalue()
    progress.set_quiet(True)
    try:
        quiet = Terminal()
        monkeypatch.setattr(sys, "stderr", quiet)
        for _ in progress.bar(range(3), desc="work"):
            pass
        assert quiet.getvalue() == ""
    finally:
        progress.set_quiet(False)


@pytest.mark.parametrize("quiet", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_training_shows_each_epochs_pairs_per_second_loss_and_eta(terminal, tmp_path, short_test_data, quiet):
    # The test evaluation on 100 images: its bars are the same as on 1,000.
    argv = ["--model", "gru", "--preset", "quick", "--model-dir", str(tmp_path / "run"), "--data", str(short_test_data),
            *TINY, "--set", "train.max_train_images=64", "--set", "train.validate_every=0"] + (["--quiet"] if quiet else [])
    stream = terminal()
    assert train.main(argv, export=False) == 0
    text = stream.getvalue()
    epochs = bar_lines(text, "epoch ")
    if quiet:
        assert epochs == [] and "encoding" not in text
        return
    # 2 epochs of 320 pairs (64 images x 5 captions), batches of 32.
    finals = [line for line in epochs if "320/320" in line]
    assert sorted({line.split(":")[0] for line in finals}) == ["epoch 1 of 2", "epoch 2 of 2"]
    assert all("pair/s" in line and "loss=" in line and "step=" in line for line in finals)
    assert any(re.search(r"<\d\d:\d\d", line) for line in epochs)  # the remaining time
    assert bar_lines(text, "encoding captions") and bar_lines(text, "scoring 128-image blocks")


def test_evaluation_shows_encoding_and_scoring(trained, terminal):
    stream = terminal()
    assert evaluate.main(["--model-dir", str(trained)]) == 0
    text = stream.getvalue()
    # Sub-step bars are cleared when done; each was drawn with its total.
    assert all("/1000 " in line for line in bar_lines(text, "encoding images")) and "encoding images" in text
    assert all("/5000 " in line for line in bar_lines(text, "encoding captions")) and "encoding captions" in text
    assert all("/8 " in line for line in bar_lines(text, "scoring 128-image blocks"))
    assert "scoring 128-image blocks" in text
