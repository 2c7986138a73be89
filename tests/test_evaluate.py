import numpy as np
import pytest

import evaluate
import metrics
from data.errors import InputError


def dot(a, b):
    return a @ b.T


def encodings(n_images, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.normal(size=(n_images, 8)).astype(np.float32)
    texts = np.repeat(images, 5, axis=0) + rng.normal(scale=2.0, size=(5 * n_images, 8)).astype(np.float32)
    return images, texts, np.repeat(np.arange(n_images), 5)


def test_full_protocol_in_blocks_equals_the_whole_matrix(monkeypatch):
    images, texts, caption_image = encodings(300)
    monkeypatch.setattr(evaluate, "IMAGE_BLOCK", 64)
    monkeypatch.setattr(evaluate, "CAPTION_BLOCK", 333)
    result = evaluate.evaluate_encodings(dot, images, texts, caption_image)
    sentence_ranks = metrics.sentence_similarity_ranks(dot(texts, texts), caption_image)
    assert result.pop("t2t_meanr") == pytest.approx(sentence_ranks.mean())
    assert result == metrics.retrieval_metrics(dot(images, texts), caption_image)


def test_5fold1k_averages_folds_of_1000_images():
    images, texts, caption_image = encodings(2000)
    result = evaluate.evaluate_encodings(dot, images, texts, caption_image, protocol="5fold1k")
    folds = [metrics.retrieval_metrics(dot(images[a:a + 1000], texts[5 * a:5 * a + 5000]), caption_image[:5000])
             for a in (0, 1000)]
    for name in metrics.METRIC_NAMES:
        assert result[name] == pytest.approx((folds[0][name] + folds[1][name]) / 2)
    whole = evaluate.evaluate_encodings(dot, images, texts, caption_image)
    assert result["rsum"] > whole["rsum"]  # 1K candidates are easier than 2K


def test_5fold1k_needs_whole_folds():
    images, texts, caption_image = encodings(1500)
    with pytest.raises(InputError, match="multiple of 1000 images"):
        evaluate.evaluate_encodings(dot, images, texts, caption_image, protocol="5fold1k")


def test_table_lists_both_directions_and_rsum():
    images, texts, caption_image = encodings(20)
    table = evaluate.format_table(evaluate.evaluate_encodings(dot, images, texts, caption_image))
    assert "i2t" in table and "t2i" in table and "rsum" in table


@pytest.mark.parametrize("value, message", [("0", "must be at least 1; got 0"), ("x", "expected an integer; got 'x'")])
def test_counts_on_the_command_line_are_checked_by_argparse(value, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        evaluate.main(["--batch-size", value])
    assert exit_.value.code == 2 and f"argument --batch-size: {message}" in capsys.readouterr().err
