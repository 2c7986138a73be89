"""The Fisher-vector models (Klein et al. 2015) fitted through train.py:
the export on raw strings against a NumPy reference, dropped words, the
fit's logs and results."""

import json
import math

import numpy as np
import pytest
import tensorflow as tf

import train
from data.tokenizer import tokenize_strings
from models.fisher_vectors.mixtures import Mixture
from models.restore import restore_model

CAPTIONS = ["A dog runs through the grass .", "Two children play on a beach", "zzzq qqqz"]


def numpy_fisher_vector(layer, words):
    """Eqs. 4, 5, 10, 11 with power + L2 normalisation, vectorised NumPy."""
    mixture = Mixture(np.exp(layer.log_weights.numpy()), layer.loc.numpy(), layer.scale.numpy(),
                      layer.laplacian.numpy().astype(bool))
    t = mixture.responsibilities(words)  # [N, K]
    z = (words[:, None, :] - mixture.loc) / mixture.scale  # [N, K, D]
    b = mixture.laplacian
    norm = np.sqrt(len(words) * mixture.weights)[:, None]
    location = np.einsum("nk,nkd->kd", t, np.where(b, np.where(z >= 0, 1.0, -1.0), z)) / norm
    scale = np.einsum("nk,nkd->kd", t, np.where(b, np.abs(z) - 1, z**2 - 1)) / (norm * np.where(b, 1, math.sqrt(2)))
    vector = np.concatenate([location.ravel(), scale.ravel()])
    vector = np.sign(vector) * np.sqrt(np.abs(vector))
    return vector / np.linalg.norm(vector)


def test_saved_model_on_raw_strings_equals_the_numpy_reference(trained_fv):
    _, model = restore_model(trained_fv)
    loaded = tf.saved_model.load(str(trained_fv / "saved_model"))
    got = loaded.encode_text(tf.constant(CAPTIONS)).numpy()
    vocabulary = model.vectorizer.vocabulary
    table = model.word_table.numpy().astype(np.float64)
    projection = model.text_projection
    for row, tokens in enumerate(tokenize_strings(CAPTIONS, "treebank")):
        ids = [vocabulary.index(t) for t in tokens if t in vocabulary]
        if ids:
            sentence = numpy_fisher_vector(model.fisher_vector_0, table[ids])
        else:  # only unknown words: the zero vector, projected like any other
            sentence = np.zeros(projection.input_dim)
        expected = (sentence - projection.mean.numpy()) @ projection.directions.numpy() * projection.correlations.numpy()
        np.testing.assert_allclose(got[row], expected / np.linalg.norm(expected), rtol=1e-4, atol=2e-5)
    assert np.all(np.isfinite(got[2])) and np.isclose(np.linalg.norm(got[2]), 1, atol=1e-5)


def test_words_without_a_vector_are_dropped_not_embedded(trained_fv):
    _, model = restore_model(trained_fv)
    encode = lambda texts: model.encode_text(model.vectorizer(tf.constant(texts))).numpy()  # noqa: E731
    np.testing.assert_allclose(encode(["a dog zzzq runs qqqz"]), encode(["a dog runs"]), atol=1e-6)


def test_fit_logs_em_and_the_ridge_sweep_and_reports_sentence_similarity(trained_fv):
    results = json.loads((trained_fv / "results.json").read_text())
    assert 1 <= results["test"]["t2t_meanr"] < 2500  # random: about 1000
    assert results["test"]["rsum"] > 60  # chance: 3.3, on a CCA fitted on 300 images
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(trained_fv / "logs" / "train"), size_guidance={"tensors": 0}).Reload()
    tags = events.Tags()["tensors"]
    assert "em/hybrid_log_likelihood_per_word" in tags and "cca/dev_rsum" in tags
    log_likelihoods = [tf.make_ndarray(e.tensor_proto) for e in events.Tensors("em/hybrid_log_likelihood_per_word")]
    assert len(log_likelihoods) == 3 and all(b >= a - 1e-6 for a, b in zip(log_likelihoods, log_likelihoods[1:]))
    assert len(events.Tensors("cca/dev_rsum")) == 2
    dev_rsums = [float(tf.make_ndarray(e.tensor_proto)) for e in events.Tensors("cca/dev_rsum")]
    # What the fit chose, for the log and `python -m report`.
    fit = results["fit"]
    assert fit["cca_dev_rsum"] == pytest.approx(max(dev_rsums), abs=1e-3) and fit["cca_eta"] > 0
    assert 0 <= fit["hglmm_laplacian_fraction"] <= 1


def test_paper_preset_needs_the_users_word_vectors(tmp_path, capsys):
    assert train.main(["--model", "fv-gmm", "--model-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert "model.word_vectors" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()
