"""tools/word_order.py: Ma et al.'s Table 5 and its test-set-wide version."""

import dataclasses
import json

import numpy as np
import pytest

from common.errors import InputError
from data import readers
from data.image_features import ImageFeatures
from engine import scoring
from tests.helpers import EMBEDDED_DATA, renamed_test_split
from tools import word_order


def test_shuffles_permute_the_words_and_keep_the_final_full_stop():
    rng = np.random.default_rng(0)
    caption = "Three people sit at an outdoor table ."
    shuffled = [word_order.shuffle_words(caption, rng) for _ in range(20)]
    assert all(s.endswith(" .") and sorted(s.split()) == sorted(caption.split()) for s in shuffled)
    assert len(set(shuffled)) > 10
    assert sorted(word_order.shuffle_words("no stop here", rng).split()) == ["here", "no", "stop"]


def test_table5_sentences_are_the_test_captions_words_reordered():
    split = readers.load_precomp(EMBEDDED_DATA, "test")
    image = split.image_ids.index(word_order.TABLE5_IMAGE)
    assert word_order.TABLE5_SENTENCES[0] in [c for c, i in zip(split.captions, split.caption_image) if i == image]
    words = sorted(word_order.TABLE5_SENTENCES[0].lower().split())
    assert all(sorted(s.split()) == words for s in word_order.TABLE5_SENTENCES[1:])


def test_drops_are_each_captions_own_pair_scores(trained_mcnn_st):
    scorer = scoring.CheckpointScorer.from_model_dir(trained_mcnn_st)
    split = readers.load_precomp(EMBEDDED_DATA, "test").first_images(word_order.IMAGE_GROUP + 5)  # a group, a rest
    drops, true_scores = word_order.word_order_drops(scorer, split, shuffles=2, seed=3)
    rng = np.random.default_rng(3)
    shuffled = [[word_order.shuffle_words(caption, rng) for _ in range(2)] for caption in split.captions]
    # Each image scored alone against its own captions, each followed by its shuffles: other batches (and
    # paddings) than the tool's, one scoring an image rather than a caption (a scorer call costs milliseconds).
    for image in range(len(split.images)):
        own = np.flatnonzero(split.caption_image == image)
        texts = [text for j in own for text in (split.captions[j], *shuffled[j])]
        scores = scorer.similarity(scorer.encode_images(split.images[image : image + 1]), scorer.encode_texts(texts))
        for j, row in zip(own, scores[0].reshape(len(own), 3)):
            assert true_scores[j] == pytest.approx(row[0], abs=1e-5)
            np.testing.assert_allclose(drops[j], row[0] - row[1:], atol=1e-5)
    summary = word_order.summarise(drops, true_scores, split.caption_image, bootstrap=200)
    assert summary["ci95"][0] <= summary["mean_drop"] <= summary["ci95"][1]


def caption_bootstrap_ci(per_caption, bootstrap=2000, seed=1):
    """The interval that resampling captions as independent would give."""
    rng = np.random.default_rng(seed)
    means = [per_caption[rng.integers(0, len(per_caption), len(per_caption))].mean() for _ in range(bootstrap)]
    return np.percentile(means, [2.5, 97.5])


def test_the_bootstrap_resamples_images_with_all_their_captions():
    """3 images x 5 captions, each image's captions dropping by one value
    (0, 1, 5): a resample of images averages 3 draws of {0, 1, 5}, so its
    2.5 and 97.5 percentiles are 0 and 5 (all three draws the same image:
    1/27 > 2.5 % each way), wider than resampling the 15 captions."""
    caption_image = np.repeat([0, 1, 2], 5)
    drops = np.repeat([0.0, 1.0, 5.0], 5)[:, None] * np.ones((1, 2))
    summary = word_order.summarise(drops, np.arange(15.0), caption_image)
    assert summary["mean_drop"] == pytest.approx(2.0)
    assert summary["ci95"] == pytest.approx([0.0, 5.0])
    low, high = caption_bootstrap_ci(drops.mean(axis=1))
    assert 0.5 < low < high < 3.5
    assert (summary["captions"], summary["images"], summary["shuffles"]) == (15, 3, 2)


def test_the_image_bootstrap_is_a_numpy_image_bootstrap_and_the_mean_is_over_captions():
    """12 images of 1-5 captions (more captions, larger drops), in shuffled
    order: the interval matches a plain NumPy image bootstrap (another
    seed, 20,000 resamples) to sampling noise; the mean is the mean over
    captions, not over images."""
    rng = np.random.default_rng(7)
    counts = rng.integers(1, 6, 12)
    caption_image = np.repeat(np.arange(12), counts)
    effect = 0.5 * (counts - 3) + rng.normal(0, 0.5, 12)
    drops = effect[caption_image][:, None] + rng.normal(0, 0.1, (len(caption_image), 3))
    order = rng.permutation(len(caption_image))
    drops, caption_image = drops[order], caption_image[order] + 100  # ids need not start at 0
    per_caption = drops.mean(axis=1)
    by_image = [per_caption[caption_image == image] for image in np.unique(caption_image)]
    reference_rng = np.random.default_rng(123)
    means = [np.concatenate([by_image[i] for i in reference_rng.integers(0, 12, 12)]).mean() for _ in range(20000)]
    reference = np.percentile(means, [2.5, 97.5])

    summary = word_order.summarise(drops, rng.normal(size=len(drops)), caption_image, bootstrap=2000, seed=0)
    np.testing.assert_allclose(summary["ci95"], reference, atol=0.04)
    assert summary["mean_drop"] == pytest.approx(drops.mean())
    assert abs(drops.mean() - np.mean([d.mean() for d in by_image])) > 0.1  # the two means differ here
    low, high = caption_bootstrap_ci(per_caption)
    assert high - low < 0.8 * (reference[1] - reference[0])


def test_a_bag_of_words_model_is_blind_to_word_order():
    from models import registry

    spec = registry.get("w2vv-bow")
    split = readers.load_precomp(EMBEDDED_DATA, "test").first_images(30)
    config = spec.experiment("paper", ["model.hidden_units=[16]", "model.word_vectors=null"]).model
    model = spec.build_model(config, spec.vocabulary(config, split.captions), ImageFeatures("fc", 1280))
    drops, _ = word_order.word_order_drops(scoring.CheckpointScorer(model), split)
    # Each drop subtracts two float32 cosines of one image and one bag of
    # words, computed at different rows of the text batch and columns of the
    # score matrix, which oneDNN accumulates in different orders (±6e-8 on
    # AVX2). A cosine sums 1280 products of unit vectors' coordinates, whose
    # magnitudes sum to at most 1: within 1280 * 2^-24 = 7.6e-5 of exact in
    # any order, so a drop within twice that. The same model with a GRU
    # instead of the bag drops by 1e-2 (median).
    assert drops.shape == (150, 3)
    np.testing.assert_allclose(drops, 0.0, rtol=0, atol=2 * 1280 * 2.0**-24)


def test_command_prints_table5_and_writes_json(trained_mcnn_st, short_test_data, tmp_path, capsys):
    out = tmp_path / "word_order.json"
    argv = ["--model-dir", str(trained_mcnn_st), "--saved-model", str(trained_mcnn_st / "saved_model"),
            "--data", str(short_test_data), "--shuffles", "1", "--bootstrap", "100", "--json", str(out)]
    assert word_order.main(argv) == 0
    record = json.loads(out.read_text())
    assert record["command"].startswith("python -m tools.word_order --model-dir ") and "--json" not in record["command"]
    results = {report.pop("model"): report for report in record["reports"]}
    # Named by their paths, outside the repository <dir>/NAME (no folder of this machine).
    checkpoint, saved = results[f"<dir>/{trained_mcnn_st.name}"], results["<dir>/saved_model"]
    assert (checkpoint["captions"], checkpoint["images"], len(checkpoint["table5"])) == (500, 100, 4)
    np.testing.assert_allclose(checkpoint["table5"], saved["table5"], atol=1e-5)
    assert checkpoint["mean_drop"] == pytest.approx(saved["mean_drop"], abs=1e-5)
    printed = capsys.readouterr().out
    assert "Table 5" in printed and word_order.TABLE5_SENTENCES[3] in printed


def test_bad_arguments_are_one_line_errors(tmp_path, capsys):
    assert word_order.main(["--model-dir", str(tmp_path)]) == 2
    assert "config.json" in capsys.readouterr().err


def test_table5_image_is_found_with_or_without_its_extension():
    """Collections name items without `.jpg`: Table 5's image is found either way, and its absence named."""
    split = readers.RetrievalSplit(
        images=np.zeros((3, 2), np.float32), captions=["a"] * 3, caption_image=np.arange(3),
        image_ids=["x", "1258913059_07c613f7ff", "y.jpg"], source="/data/test",
    )
    assert word_order.table5_image(split) == 1
    assert word_order.table5_image(dataclasses.replace(split, image_ids=["x", "y", "1258913059_07c613f7ff.jpg"])) == 2
    with pytest.raises(InputError, match=r"^/data/test: image 1258913059_07c613f7ff\.jpg \(Table 5's\)"):
        word_order.table5_image(dataclasses.replace(split, image_ids=["x", "y", "z"]))


def test_collection_data_gives_the_precomp_table5_scores(trained, short_test_data, tmp_path, capsys):
    """data.collections' own output (ids without .jpg) runs and scores Table 5's image as the precomp data does."""
    from data import collections, splits

    root = tmp_path / "collections"
    collections.precomp_to_collections(short_test_data, root, splits=("test",))
    out = tmp_path / "word_order.json"
    argv = ["--model-dir", str(trained), "--data", str(root), "--shuffles", "1", "--bootstrap", "10", "--json", str(out)]
    assert word_order.main(argv) == 0
    scorer = scoring.CheckpointScorer.from_model_dir(trained)
    expected = word_order.table5_row(scorer, splits.load_split(short_test_data, "test"))
    (report,) = json.loads(out.read_text())["reports"]
    assert report["model"] == f"<dir>/{trained.name}"  # outside the repository: no folder of this machine
    np.testing.assert_allclose(report["table5"], expected, atol=1e-5)


def test_a_split_without_table5s_image_fails_before_any_scoring(trained, sample_data, tmp_path, capsys, monkeypatch):
    """Exit 2 with one line naming the data, before any scoring; the --json file is not written."""
    data, _ = renamed_test_split(sample_data, tmp_path / "data", lambda name: f"other_{name}")
    monkeypatch.setattr(word_order, "word_order_drops", lambda *args: pytest.fail("scored before the check"))
    out = tmp_path / "word_order.json"
    argv = ["--model-dir", str(trained), "--data", str(data), "--json", str(out)]
    assert word_order.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [(f"error: {data}: image 1258913059_07c613f7ff.jpg (Table 5's) is not in this split; "
                    "word_order needs the Flickr8k test split")]
    assert not out.exists()


@pytest.mark.parametrize("argv, message", [
    (["--seed", "-1"], "argument --seed: must be at least 0; got -1"),
    (["--shuffles", "0"], "argument --shuffles: must be at least 1; got 0"),
    (["--bootstrap", "x"], "argument --bootstrap: expected an integer; got 'x'"),
])
def test_bad_numbers_are_usage_errors(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        word_order.main(["--model-dir", str(tmp_path), *argv])
    assert stop.value.code == 2 and capsys.readouterr().err.strip().splitlines()[-1].endswith(message)
