"""Tests of `data.embedded`: the paths of the data shipped in the
repository name what its READMEs describe (data/f8k_precomp/README.md,
data/glove_6b_50d/), and reading them loads no TensorFlow (the registry
and the configs name them before any model is built)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from data import embedded
from tests.helpers import REPO

# data/f8k_precomp/README.md: the standard Flickr8k split, 5 captions an image, 1280-d and 3120-d features.
IMAGES = {"train": 6000, "dev": 1000, "test": 1000}


def test_the_paths_are_absolute_and_inside_the_repository():
    for path in (embedded.EMBEDDED_DATA, embedded.EMBEDDED_GLOVE_50D):
        assert isinstance(path, str) and Path(path).is_absolute()
    assert Path(embedded.EMBEDDED_DATA) == REPO / "data" / "f8k_precomp"
    assert Path(embedded.EMBEDDED_GLOVE_50D) == REPO / "data" / "glove_6b_50d" / "glove.6B.50d.flickr8k.txt"


@pytest.mark.parametrize("split", IMAGES)
def test_the_embedded_data_is_flickr8k_in_the_precomp_layout(split):
    folder = Path(embedded.EMBEDDED_DATA)
    n = IMAGES[split]
    assert len((folder / f"{split}_ids.txt").read_text().split()) == n
    assert (folder / f"{split}_caps.txt").read_text(encoding="utf-8").count("\n") == 5 * n
    for name, width in (("ims", 1280), ("stages", 3120)):
        features = np.load(folder / f"{split}_{name}.npy", mmap_mode="r")
        assert features.shape == (n, width) and features.dtype == np.float16


def test_the_embedded_vectors_are_glove_50d_in_word2vec_text_format():
    lines = Path(embedded.EMBEDDED_GLOVE_50D).read_text(encoding="utf-8").splitlines()
    count, dim = map(int, lines[0].split())
    assert dim == 50 and count == len(lines) - 1
    assert all(len(line.split(" ")) == 51 for line in lines[1:])
    assert len({line.split(" ", 1)[0] for line in lines[1:]}) == count


def test_naming_the_embedded_data_loads_no_tensorflow():
    code = "import sys, data.embedded; print('tensorflow' in sys.modules, 'numpy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]
