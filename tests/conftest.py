"""Fixtures shared by several test modules."""

import pytest

import train

# A few minutes of CPU at most for any of these runs.
TINY_W2VV = [
    "--set", "model.gru_units=16", "--set", "model.hidden_units=[64]",
    "--set", "train.epochs=1", "--set", "train.max_train_images=160", "--set", "train.batch_size=40",
]


@pytest.fixture(scope="session")
def trained_w2vv(tmp_path_factory):
    """A multi-scale Word2VisualVec run of the quick preset (GloVe-50),
    shrunk to 160 training images and one epoch."""
    model_dir = tmp_path_factory.mktemp("run") / "w2vv"
    assert train.main(["--model", "w2vv", "--preset", "quick", "--model-dir", str(model_dir), *TINY_W2VV]) == 0
    return model_dir
