"""The Fisher-vector models (Klein et al. 2015) fitted through train.py:
the export on raw strings against a NumPy reference built from the raw
word vectors (ICA by scikit-learn), the scikit-learn GMM path against
scikit-learn and the GMM Fisher vector of Sanchez et al., the word table
written block by block, dropped words, the fit's logs and results."""

import itertools
import json
import warnings

import numpy as np
import pytest
import tensorflow as tf
from sklearn.decomposition import FastICA
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture

import train
from data.readers import RetrievalSplit
from data.tokenizer import tokenize_strings
from data.vocabulary import Vocabulary
from data.word_vectors import WordVectors
from models.fisher_vectors import model as fv_model
from models.fisher_vectors.config import FVConfig
from models.fisher_vectors.mixtures import Mixture
from models.fisher_vectors.model import FisherVectorModel
from models.restore import restore_model
from tests.layers.test_fisher_vector import numpy_fisher_vector, power_and_l2

CAPTIONS = ["A dog runs through the grass .", "Two children play on a beach", "zzzq qqqz"]


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def stored_mixture(layer):
    return Mixture(np.exp(layer.log_weights.numpy().astype(np.float64)), layer.loc.numpy().astype(np.float64),
                   layer.scale.numpy().astype(np.float64), layer.laplacian.numpy().astype(bool))


def read_glove(path):
    """word -> vector, straight from the GloVe text file, in float32 as any
    word-vector file is held: FastICA's result depends on that rounding
    (float64 input converges elsewhere, in 10 times the iterations)."""
    with open(path, encoding="utf-8") as lines:
        return {word: np.array(values.split(), np.float32).astype(np.float64)
                for word, values in (line.split(" ", 1) for line in lines)}


def test_saved_model_on_raw_strings_equals_the_numpy_reference(trained_fv):
    """raw GloVe -> unit -> ICA (scikit-learn's FastICA with the model's
    settings, on the same seeded sample of the vocabulary's vectors, its
    unmixing matrix applied without centring) -> unit -> the Fisher vector
    (eqs. 4, 5, 10, 11, power, L2) under the stored HGLMM -> the stored CCA."""
    run, model = restore_model(trained_fv)
    config = run.experiment
    loaded = tf.saved_model.load(str(trained_fv / "saved_model"))
    got = loaded.encode_text(tf.constant(CAPTIONS)).numpy()
    glove = read_glove(config.model.word_vectors)
    words = model.vectorizer.vocabulary[2:]
    raw = unit(np.stack([glove[word] for word in words]))
    seed = config.train.seed
    sample = raw[np.random.default_rng(seed).permutation(len(raw))[: config.model.ica_sample]]
    ica = FastICA(algorithm="deflation", fun="cube", whiten="unit-variance", random_state=seed, max_iter=1000)
    table = dict(zip(words, unit(raw @ ica.fit(sample).components_.T)))
    mixture = stored_mixture(model.fisher_vector_0)
    projection = model.text_projection
    for row, tokens in enumerate(tokenize_strings(CAPTIONS, "treebank")):
        known = [table[token] for token in tokens if token in table]
        if known:
            sentence = power_and_l2(numpy_fisher_vector(mixture, np.stack(known)))
        else:  # only unknown words: the zero vector, projected like any other
            sentence = np.zeros(projection.input_dim)
        expected = (sentence - projection.mean.numpy()) @ projection.directions.numpy() * projection.correlations.numpy()
        np.testing.assert_allclose(got[row], expected / np.linalg.norm(expected), rtol=1e-4, atol=2e-5)
    assert np.all(np.isfinite(got[2])) and np.isclose(np.linalg.norm(got[2]), 1, atol=1e-5)


def hand_made_words():
    """120 words in three tight clusters of 60, 40 and 20 on the unit
    sphere, named so that the tokenizer keeps them whole."""
    rng = np.random.default_rng(0)
    centres = np.array([[1, 1, 0, 0], [0, 0, 1, 1], [1, -1, 1, -1]], float)
    vectors = np.concatenate([c + rng.normal(scale=0.12, size=(n, 4)) for c, n in zip(centres, (60, 40, 20))])
    words = ["".join(letters) for letters in itertools.islice(itertools.product("bcdfg", repeat=3), len(vectors))]
    return words, vectors


def fit_on_hand_made_words(encoding, seed):
    words, vectors = hand_made_words()
    keyed = WordVectors.in_memory(words, vectors, "hand-made")
    config = FVConfig(encoding=encoding, word_dim=4, num_components=3, ica=False, cca_etas=(1e-2,))
    model = FisherVectorModel(config, Vocabulary(["<pad>", "<unk>", *words]), image_dim=3)
    model.set_word_vectors(keyed, seed)

    def split(images, split_seed):
        rng = np.random.default_rng(split_seed)
        captions = [" ".join(rng.choice(words, 5)) for _ in range(2 * images)]
        return RetrievalSplit(rng.normal(size=(images, 3)).astype(np.float32), captions,
                              np.repeat(np.arange(images), 2), [""] * images, "hand-made")

    model.fit_split(split(30, 1), split(10, 2), tf.summary.create_noop_writer(), seed=seed)
    return model, words, unit(vectors)


def test_the_word_table_is_written_block_by_block_as_the_numpy_reference(monkeypatch):
    """Blocks of 7 rows (the table has 124: uneven); "zzzq" has no vector.
    Reference: scikit-learn's FastICA with the model's settings on the
    same seeded sample, its unmixing applied to every unit vector."""
    monkeypatch.setattr(fv_model, "TABLE_BLOCK", 7)
    words, vectors = hand_made_words()
    keyed = WordVectors.in_memory(words, vectors, "hand-made")
    config = FVConfig(encoding="hglmm", word_dim=4, num_components=3, ica_sample=50)
    vocabulary = ["<pad>", "<unk>", *words[:60], "zzzq", *words[60:]]
    model = FisherVectorModel(config, Vocabulary(vocabulary), image_dim=3)
    model.set_word_vectors(keyed, seed=2)
    sample = model.fit_word_table(seed=2)
    raw = unit(vectors.astype(np.float32).astype(np.float64))
    picked = np.random.default_rng(2).permutation(len(raw))[:50]
    ica = FastICA(algorithm="deflation", fun="cube", whiten="unit-variance", random_state=2, max_iter=1000)
    unmixing = ica.fit(raw[picked]).components_
    expected = np.zeros((len(vocabulary), 4))
    expected[[i for i, word in enumerate(vocabulary) if word in keyed.key_to_index]] = unit(raw @ unmixing.T)
    np.testing.assert_allclose(model.word_table.numpy(), expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(sample, unit(raw[picked] @ unmixing.T), rtol=1e-12)


def sanchez_gmm_fisher_vector(gmm, words):
    """The GMM Fisher vector of Sanchez et al. (IJCV 2013, eqs. 18-19)
    from a fitted scikit-learn GaussianMixture, power and L2 normalised:
    G_mu_k = (N sqrt(w_k))^-1 sum_i gamma_ik (x_i - mu_k) / sigma_k,
    G_sigma_k = (N sqrt(2 w_k))^-1 sum_i gamma_ik ((x_i - mu_k)^2 / sigma_k^2 - 1)
    (Klein et al.'s (N w_k)^-1/2 differs by sqrt(N), which the L2 removes)."""
    gamma = gmm.predict_proba(words)  # [N, K]
    sigma = np.sqrt(gmm.covariances_)
    z = (words[:, None, :] - gmm.means_) / sigma  # [N, K, D]
    norm = len(words) * np.sqrt(gmm.weights_)[:, None]
    g_mu = np.einsum("nk,nkd->kd", gamma, z) / norm
    g_sigma = np.einsum("nk,nkd->kd", gamma, z**2 - 1) / (np.sqrt(2) * norm)
    return power_and_l2(np.concatenate([g_mu.ravel(), g_sigma.ravel()]))


@pytest.mark.parametrize("encoding", ["gmm", "gmm-hglmm"])
def test_the_gmm_is_scikit_learns_and_its_fisher_vector_that_of_sanchez_et_al(encoding):
    seed = 1
    model, words, vectors = fit_on_hand_made_words(encoding, seed)
    # The same GMM settings (model.py) on the same seeded shuffle of the
    # (unit) vocabulary vectors, so that the random_from_data initial means
    # are the same rows.
    reference = GaussianMixture(3, covariance_type="diag", init_params="random_from_data", reg_covar=1e-5,
                                random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reference.fit(vectors[np.random.default_rng(seed).permutation(len(vectors))])
    gmm = stored_mixture(model.fisher_vector_0)
    assert not gmm.laplacian.any()
    np.testing.assert_allclose(gmm.weights, reference.weights_, rtol=1e-6)
    np.testing.assert_allclose(gmm.loc, reference.means_, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gmm.scale**2, reference.covariances_, rtol=1e-5)
    # The fit found the clusters: their sizes, means and variances (+ reg_covar).
    clusters = np.split(vectors, [60, 100])
    order = [np.argmin(np.linalg.norm(reference.means_ - c.mean(axis=0), axis=1)) for c in clusters]
    np.testing.assert_allclose(reference.weights_[order], [0.5, 1 / 3, 1 / 6], rtol=1e-9)
    np.testing.assert_allclose(reference.covariances_[order], [c.var(axis=0) + 1e-5 for c in clusters], rtol=1e-6)

    # A caption of vocabulary words (one from each cluster and a repeat)
    # through the word table and the stored mixture(s).
    ids = [2, 3, 70, 110]
    caption = " ".join(words[i - 2] for i in ids)
    got = model.sentence_vector(model.vectorizer(tf.constant([caption]))).numpy()[0].astype(np.float64)
    size = 2 * 3 * 4
    np.testing.assert_allclose(got[:size], sanchez_gmm_fisher_vector(reference, vectors[np.array(ids) - 2]),
                               rtol=1e-4, atol=1e-5)
    if encoding == "gmm-hglmm":  # then the HGLMM's, each normalised on its own
        hglmm = stored_mixture(model.fisher_vector_1)
        np.testing.assert_allclose(got[size:], power_and_l2(numpy_fisher_vector(hglmm, vectors[np.array(ids) - 2])),
                                   rtol=1e-4, atol=1e-5)
    else:
        assert len(got) == size
    # Words between two clusters, where the posteriors are soft: the point
    # of the segment between two means where scikit-learn's posterior is 1/2.
    first, second = order[0], order[1]
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        point = unit((1 - middle) * reference.means_[first] + middle * reference.means_[second])
        low, high = (middle, high) if reference.predict_proba(point[None])[0, first] > 0.5 else (low, middle)
    between = np.stack([point, vectors[0], unit(point + 0.02)])
    assert 0.05 < reference.predict_proba(between)[2, first] < 0.95
    got = model.fisher_vector_0(between[None].astype(np.float32), np.ones((1, 3), bool)).numpy()[0]
    np.testing.assert_allclose(got, sanchez_gmm_fisher_vector(reference, between), rtol=1e-3, atol=1e-4)


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
