"""End to end: a collection whose dev and test items have one caption each
(TrecVid's video-to-text setting) trains, is tested, exported and
evaluated; the sentence-similarity rank, undefined there, is left out of
the results with a note instead of ending the run with a ValueError."""

import json

import numpy as np
import pytest

import evaluate
import train
from data import collections, readers
from tests.helpers import EMBEDDED_DATA, evaluated_metrics

SIZES = {"train": 100, "dev": 20, "test": 30}
NOTE = ("t2t_meanr left out: each of the 30 captions is the only one of its item, and sentence similarity "
        "ranks another caption of the same item")


@pytest.fixture(scope="module")
def one_caption_run(tmp_path_factory):
    """Collections of the embedded Flickr8k: train images with their 5
    captions, dev and test images with their first caption only; the tiny
    `gru` trained on them for one epoch."""
    root = tmp_path_factory.mktemp("one_caption")
    for split, n in SIZES.items():
        data = readers.load_precomp(EMBEDDED_DATA, split)
        items = [collections.item_id(image) for image in data.image_ids[:n]]
        per_item = 5 if split == "train" else 1
        captions = [(items[i], caption) for j, (i, caption) in enumerate(zip(data.caption_image, data.captions))
                    if i < n and j % 5 < per_item]
        collections.write_collection(root, split, "ims", items, data.images[:n], captions)
    model_dir = root / "run"
    argv = ["--model", "gru", "--preset", "quick", "--data", str(root), "--model-dir", str(model_dir),
            "--set", "model.word_dim=16", "--set", "model.embed_dim=32", "--set", "train.epochs=1",
            "--set", "train.batch_size=50"]
    assert train.main(argv) == 0
    return root, model_dir


def test_the_collection_has_one_caption_per_test_item(one_caption_run):
    root, _ = one_caption_run
    from data import splits

    test = splits.load_split(root, "test")
    assert len(test.captions) == len(test.images) == 30
    np.testing.assert_array_equal(test.caption_image, np.arange(30))


def test_training_ends_with_results_and_an_export(one_caption_run):
    _, model_dir = one_caption_run
    assert (model_dir / "saved_model" / "saved_model.pb").exists()
    results = json.loads((model_dir / "results.json").read_text())
    test = results["test"]
    assert "t2t_meanr" not in test and test["notes"] == {"t2t_meanr": NOTE}
    # One caption per item: an image's AP is 1 / the rank of its caption, so mAP = MIR.
    assert test["i2t_map"] == pytest.approx(test["i2t_mir"])
    assert 1 <= test["i2t_meanr"] <= 30 and 1 <= test["t2i_meanr"] <= 30
    assert "notes" not in results["dev"]  # validation never asks for sentence similarity


def test_evaluate_py_on_the_run_and_on_its_export(one_caption_run, tmp_path, capsys):
    _, model_dir = one_caption_run
    results = json.loads((model_dir / "results.json").read_text())
    out = tmp_path / "metrics.json"
    assert evaluate.main(["--model-dir", str(model_dir), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"note: {NOTE}" in printed.splitlines()
    metrics = evaluated_metrics(out)
    assert metrics["notes"] == {"t2t_meanr": NOTE}
    assert metrics["rsum"] == pytest.approx(results["test"]["rsum"], abs=1e-6)
    saved = tmp_path / "saved.json"
    assert evaluate.main(["--saved-model", str(model_dir / "saved_model"), "--data", str(one_caption_run[0]),
                          "--json", str(saved)]) == 0
    assert evaluated_metrics(saved)["rsum"] == pytest.approx(results["test"]["rsum"], abs=1e-4)
