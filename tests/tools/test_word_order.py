"""tools/word_order.py: Ma et al.'s Table 5 and its test-set-wide version."""

import json

import numpy as np
import pytest

from data import readers
from engine import scoring
from tests.helpers import EMBEDDED_DATA
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
    split = readers.load_precomp(EMBEDDED_DATA, "test").first_images(45)  # groups of 20 and a rest
    drops, true_scores = word_order.word_order_drops(scorer, split, shuffles=2, seed=3)
    rng = np.random.default_rng(3)
    for j, caption in enumerate(split.captions):
        shuffled = [word_order.shuffle_words(caption, rng) for _ in range(2)]
        image = scorer.encode_images(split.images[split.caption_image[j] : split.caption_image[j] + 1])
        scores = scorer.similarity(image, scorer.encode_texts([caption, *shuffled]))[0]
        assert true_scores[j] == pytest.approx(scores[0], abs=1e-5)
        np.testing.assert_allclose(drops[j], scores[0] - scores[1:], atol=1e-5)
    summary = word_order.summarise(drops, true_scores, bootstrap=200)
    assert summary["ci95"][0] <= summary["mean_drop"] <= summary["ci95"][1]


def test_a_bag_of_words_model_is_blind_to_word_order():
    from models import registry

    spec = registry.get("w2vv-bow")
    split = readers.load_precomp(EMBEDDED_DATA, "test").first_images(30)
    config = spec.experiment("paper", ["model.hidden_units=[16]", "model.word_vectors=null"]).model
    model = spec.build_model(config, spec.vocabulary(config, split.captions), image_dim=1280)
    drops, _ = word_order.word_order_drops(scoring.CheckpointScorer(model, 1280), split)
    assert drops.shape == (150, 3) and not drops.any()


def test_command_prints_table5_and_writes_json(trained_mcnn_st, short_test_data, tmp_path, capsys):
    out = tmp_path / "word_order.json"
    argv = ["--model-dir", str(trained_mcnn_st), "--saved-model", str(trained_mcnn_st / "saved_model"),
            "--data", str(short_test_data), "--shuffles", "1", "--bootstrap", "100", "--json", str(out)]
    assert word_order.main(argv) == 0
    results = json.loads(out.read_text())
    checkpoint, saved = results[str(trained_mcnn_st)], results[str(trained_mcnn_st / "saved_model")]
    assert checkpoint["captions"] == 500 and len(checkpoint["table5"]) == 4
    np.testing.assert_allclose(checkpoint["table5"], saved["table5"], atol=1e-5)
    assert checkpoint["mean_drop"] == pytest.approx(saved["mean_drop"], abs=1e-5)
    printed = capsys.readouterr().out
    assert "Table 5" in printed and word_order.TABLE5_SENTENCES[3] in printed


def test_bad_arguments_are_one_line_errors(tmp_path, capsys):
    assert word_order.main(["--model-dir", str(tmp_path)]) == 2
    assert "config.json" in capsys.readouterr().err
