"""Word2VisualVec (Dong et al. 2018): fidelity to the paper on real data,
the GRU against eq. 3 (its 32-token cut, its dropout in training), the
hidden layer's dropout, the novel-word argument, the loss and optimiser,
and the trained model's evaluation options."""

import dataclasses
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

import evaluate
from common import metrics
from common.config import TrainConfig
from data import word_vectors
from data.embedded import EMBEDDED_GLOVE_50D as GLOVE_50D
from data.image_features import ImageFeatures
from data.readers import load_precomp
from data.vocabulary import Vocabulary
from engine import scoring
from engine.train_step import make_optimizer
from models import registry
from models.w2vv import num_training_words
from tests.helpers import EMBEDDED_DATA, evaluated_metrics, random_token_ids, randomize_weights
from tests.models.test_vse import assert_packed_equals_padded, paper_batches


def glove():
    return word_vectors.load_word_vectors(GLOVE_50D)


def quick_model(name="w2vv", overrides=(), vectors=None):
    """A model of the quick preset on the real vocabulary and GloVe vectors."""
    spec = registry.get(name)
    config = spec.experiment("quick", overrides).model
    vectors = vectors or glove()
    vocabulary = spec.vocabulary(config, load_precomp(EMBEDDED_DATA, "train").captions, vectors)
    model = spec.build_model(config, vocabulary, ImageFeatures("fc", 1280))
    model.set_word_vectors(vectors, seed=0)
    return model, vocabulary


def test_vocabulary_and_composite_vector_sizes_are_the_papers_on_flickr8k():
    # Sec. III-A: words seen >= 5 times in the Flickr8k training captions
    # give m = 2,535, and with 500-d word2vec and a 1,024-d GRU the
    # composite vector of eq. 4 has 4,059 dimensions.
    spec = registry.get("w2vv")
    config = spec.experiment("paper").model
    vocabulary = spec.vocabulary(config, load_precomp(EMBEDDED_DATA, "train").captions, None)
    assert num_training_words(vocabulary, config.vocab_min_count) == 2535
    model = spec.build_model(config, vocabulary, ImageFeatures("fc", 2048))
    ids = model.vectorizer(tf.constant(["a dog runs on the grass"]))
    assert model.sentence_vector(ids).shape == (1, 4059)
    assert model.encode_text(ids).shape == (1, 2048)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def eq_3(model, words, input_masks=(1, 1, 1), recurrent_masks=(1, 1, 1)):
    """Eq. 3 in NumPy over word vectors [n, word_dim]: the last state h_n.
    In training, dropout masks per gate (z, r, h~) on the GRU's inputs v_t
    and on the state h_{t-1} that enters the gates (Keras' GRU with
    recurrent dropout, the public code's Keras 2 `dropout_W`/`dropout_U`)."""
    kernel, recurrent, bias = (w.numpy() for w in model.gru.weights[:3])
    W, U, b = (np.split(x, 3, axis=-1) for x in (kernel, recurrent, bias))
    # Keras' update gate is the paper's 1 - z: sigma(a) = 1 - sigma(-a).
    W_zv, W_zh, b_z = -W[0], -U[0], -b[0]
    W_rv, W_rh, b_r = W[1], U[1], b[1]
    W_hv, W_hh, b_h = W[2], U[2], b[2]
    (x_z, x_r, x_h), (m_z, m_r, m_h) = input_masks, recurrent_masks
    h = np.zeros(U[0].shape[0])
    for v in words:
        z = sigmoid((v * x_z) @ W_zv + (h * m_z) @ W_zh + b_z)
        r = sigmoid((v * x_r) @ W_rv + (h * m_r) @ W_rh + b_r)
        h_tilde = np.tanh((v * x_h) @ W_hv + (r * h * m_h) @ W_hh + b_h)
        h = (1 - z) * h + z * h_tilde
    return h


def test_gru_branch_is_eq_3_with_the_update_gate_relabelled():
    model, _ = quick_model("w2vv-gru", ["model.gru_units=8", "model.hidden_units=[16]"])
    ids = model.vectorizer(tf.constant(["a dog runs on the green grass", "two men"])).numpy()
    embeddings = model.word_embedding.embeddings.numpy()
    states = model.sentence_vector(tf.constant(ids)).numpy()
    for row, state in zip(ids, states):
        np.testing.assert_allclose(state, eq_3(model, embeddings[row[row != 0]]), rtol=1e-4, atol=1e-5)


# 40 training words seen 5 times (ids 2 .. 41), all in the BoW and GRU vocabulary.
SMALL_VOCABULARY = Vocabulary(["<pad>", "<unk>", *(f"w{i}" for i in range(40))], [0, 0, *[5] * 40])


def small_model(name, image_dim=12, seed=0, **settings):
    """A model of the paper preset (its dropout 0.2 and 32-token cut) at
    small sizes on `SMALL_VOCABULARY`, every weight random, biases included."""
    spec = registry.get(name)
    sizes = {"word_vectors": None, "word_dim": 6, "gru_units": 8, "hidden_units": (16,), **settings}
    config = dataclasses.replace(spec.experiment("paper").model, **sizes)
    keras.utils.set_random_seed(seed)
    return randomize_weights(spec.build_model(config, SMALL_VOCABULARY, ImageFeatures("fc", image_dim)), seed)


def captions(lengths, seed=0):
    """int32 [n, max(lengths)]: caption i has lengths[i] random words (no <unk>), then padding."""
    return random_token_ids(lengths, len(SMALL_VOCABULARY), seed, first_id=2)


def test_the_gru_reads_a_captions_first_32_tokens_and_bow_reads_them_all():
    # The public code's sent_maxlen = 32 cuts the GRU's input only.
    model = small_model("w2vv", scales=("bow", "gru"))
    lengths = [1, 2, 31, 32, 33, 45]
    ids = captions(lengths)
    embeddings = model.word_embedding.embeddings.numpy()
    sentence = model.sentence_vector(tf.constant(ids)).numpy()
    bow, gru = sentence[:, :40], sentence[:, 40:]
    for row, length, state, counts in zip(ids, lengths, gru, bow):
        np.testing.assert_array_equal(counts, np.bincount(row[:length] - 2, minlength=40))
        np.testing.assert_allclose(state, eq_3(model, embeddings[row[: min(length, 32)]]), rtol=1e-4, atol=1e-5)
        if length > 32:  # the words past the cut would have changed the state
            assert np.abs(eq_3(model, embeddings[row[:length]]) - state).max() > 1e-2
    # The same as feeding the captions cut by hand.
    np.testing.assert_array_equal(model.sentence_vector(tf.constant(ids[:, :32])).numpy()[:, 40:], gru)


def test_eq_3_in_training_drops_embeddings_gru_inputs_and_state(monkeypatch):
    # Dropout 0.2 on the word embeddings (a mask per word), the GRU's inputs
    # and its recurrent state (a mask per caption and gate, the same at
    # every step); here hand-drawn masks stand in for Keras' random ones.
    model = small_model("w2vv-gru")
    p = 0.2
    assert model.config.dropout == p
    lengths = [1, 2, 7, 40]
    ids = captions(lengths, seed=1)
    rng = np.random.default_rng(2)

    def masks(*shape):
        return ((rng.random(shape) > p) / (1 - p)).astype(np.float32)

    embedding_mask = masks(len(ids), ids.shape[1], 6)
    input_masks, recurrent_masks = masks(3, len(ids), 6), masks(3, len(ids), 8)

    def embedding_dropout(words, training=False):
        return words * embedding_mask[:, : words.shape[1]] if training else words

    monkeypatch.setattr(model.embedding_dropout, "call", embedding_dropout)
    monkeypatch.setattr(model.gru.cell, "get_dropout_mask", lambda _: list(tf.constant(input_masks)))
    monkeypatch.setattr(model.gru.cell, "get_recurrent_dropout_mask", lambda _: list(tf.constant(recurrent_masks)))
    embeddings = model.word_embedding.embeddings.numpy()
    training = model.sentence_vector(tf.constant(ids), training=True).numpy()
    inference = model.sentence_vector(tf.constant(ids)).numpy()
    for b, (row, length) in enumerate(zip(ids, lengths)):
        n = min(length, 32)
        words = embeddings[row[:n]] * embedding_mask[b, :n]
        want = eq_3(model, words, input_masks[:, b], recurrent_masks[:, b])
        np.testing.assert_allclose(training[b], want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(inference[b], eq_3(model, embeddings[row[:n]]), rtol=1e-4, atol=1e-5)
        assert np.abs(training[b] - inference[b]).max() > 1e-3


def test_the_hidden_layer_drops_units_at_rate_0_2_in_training_only():
    # Eqs. 5-7 with dropout 0.2 after the hidden layer. The output layer is
    # made the identity (its ReLU passes the non-negative hidden units), and
    # the hidden biases large, so every hidden unit is positive before
    # dropout: a zero in the output is a dropped unit.
    units, p = 256, 0.2
    model = small_model("w2vv-bow", image_dim=units, hidden_units=(units,))
    hidden, _, output = model.mlp.layers
    rng = np.random.default_rng(3)
    W, b = rng.normal(scale=0.1, size=(40, units)).astype(np.float32), np.full(units, 5.0, np.float32)
    hidden.set_weights([W, b])
    output.set_weights([np.eye(units, dtype=np.float32), np.zeros(units, np.float32)])
    ids = captions(list(rng.integers(1, 12, size=128)), seed=4)
    counts = np.stack([np.bincount(row[row != 0] - 2, minlength=40) for row in ids])
    want = np.maximum(counts @ W + b, 0)
    assert want.min() > 0
    np.testing.assert_allclose(model.encode_text(tf.constant(ids)), want, rtol=1e-5)  # inference: the identity
    training = model.encode_text(tf.constant(ids), training=True).numpy()
    dropped = training == 0
    # 128 x 256 units: the fraction's standard deviation is 0.0025.
    assert abs(dropped.mean() - p) < 0.015
    np.testing.assert_allclose(training[~dropped], want[~dropped] / (1 - p), rtol=1e-5)


def test_a_novel_word_with_a_vector_changes_the_encoding_through_the_word2vec_scale():
    # Sec. III-A's argument for word2vec, with its example: "faucet" is
    # below the BoW threshold (seen twice in training) but has a vector.
    vectors = glove()
    model, vocabulary = quick_model("w2vv", ["model.gru_units=8"], vectors)
    counts = dict(zip(vocabulary.tokens, vocabulary.counts))
    assert counts["faucet"] < 5 and "faucet" in vectors.key_to_index
    with_novel, without = model.vectorizer(tf.constant(["a dog drinks from a faucet", "a dog drinks from a qzxqv"]))
    bow_and_w2v = 2535 + 50
    # One caption a batch: the GRU, seeing the same ids, then runs the same
    # float32 sums in the same order, where two rows of one batch may not
    # (oneDNN's kernels treat rows unevenly).
    sentence = np.concatenate([model.sentence_vector(tf.stack([ids])).numpy() for ids in (with_novel, without)])
    # BoW and GRU both see an unknown word; only the word2vec mean differs.
    np.testing.assert_array_equal(sentence[0, :2535], sentence[1, :2535])
    np.testing.assert_array_equal(sentence[0, bow_and_w2v:], sentence[1, bow_and_w2v:])
    assert np.abs(sentence[0, 2535:bow_and_w2v] - sentence[1, 2535:bow_and_w2v]).max() > 0.1
    encodings = model.encode_text(tf.stack([with_novel, without])).numpy()
    assert np.abs(encodings[0] - encodings[1]).max() > 1e-4


def test_the_loss_is_eq_8_averaged_over_dimensions_and_batch():
    model, _ = quick_model("w2vv-bow", ["model.hidden_units=[16]"])
    rng = np.random.default_rng(0)
    images, texts = rng.uniform(0, 3, size=(2, 4, 1280)).astype(np.float32)
    loss = model.pair_loss(model.encode_image(images), texts, tf.range(4))
    # Both means sum 4 x 1280 positive float32 terms, each sum within
    # 5120 * 2^-24 (3e-4) of exact relative to itself, whatever the order.
    assert float(loss) == pytest.approx(np.mean((texts - images) ** 2), rel=2 * 5120 * 2.0**-24)


def test_rmsprop_step_emulates_keras_2_epsilon_outside_the_square_root():
    # Keras 2 (the paper's code): a = rho a + (1 - rho) g^2, p -= lr g / (sqrt(a) + 1e-6).
    # Keras 3 puts epsilon inside the root; the preset's 1e-12 emulates it.
    config = registry.get("w2vv").train
    assert (config.optimizer, config.optimizer_epsilon) == ("rmsprop", 1e-12)
    rng = np.random.default_rng(0)
    start = rng.normal(size=50).astype(np.float32)
    gradient = rng.choice([-1, 1], 50) * 10 ** rng.uniform(-3, 0, 50)

    def keras3_step(epsilon):
        variable = keras.Variable(start)
        optimizer = make_optimizer(TrainConfig(optimizer="rmsprop", learning_rate=1e-3, optimizer_epsilon=epsilon))
        optimizer.apply_gradients([(tf.constant(gradient, tf.float32), variable)])
        return variable.numpy() - start

    a = 0.1 * gradient**2
    keras2_step = -1e-3 * gradient / (np.sqrt(a) + 1e-6)
    # |g| >= 1e-3, so sqrt(a) >= 3e-4 and the two forms differ by < 0.4 %.
    np.testing.assert_allclose(keras3_step(1e-12), keras2_step, rtol=4e-3)
    # Keras 3's default epsilon (1e-7 inside the root) takes steps up to
    # ~30 % shorter for the smaller gradients.
    assert np.abs(keras3_step(None) / keras2_step - 1).max() > 0.2


def test_presets_land_in_the_written_config(trained_w2vv):
    config = json.loads((trained_w2vv / "config.json").read_text())
    assert config["model"]["scales"] == ["bow", "word2vec", "gru"]
    assert config["model"]["word_vectors"] == GLOVE_50D and config["model"]["tokenizer"] == "alnum"
    train = config["train"]
    assert (train["optimizer"], train["optimizer_epsilon"], train["grad_clip_norm"]) == ("rmsprop", 1e-12, 5.0)
    assert (train["selection_metric"], train["plateau_patience"], train["lr_decay_factor"]) == ("i2t_map", 3, 0.5)
    assert train["early_stopping_patience"] == 10 and train["learning_rate"] == 1e-3
    vocabulary = json.loads((trained_w2vv / "vocab.json").read_text())
    assert len(vocabulary["tokens"]) == len(vocabulary["counts"])


@pytest.fixture(scope="module")
def w2vv_export(trained_w2vv):
    """The run's SavedModel, loaded once for the tests that read it."""
    return scoring.SavedModelScorer(trained_w2vv / "saved_model")


def test_export_scores_by_cosine_between_predicted_and_real_features(w2vv_export):
    loaded = w2vv_export.loaded
    features = load_precomp(EMBEDDED_DATA, "test").images[:3]
    texts = tf.constant(["a dog runs", "two children play on a beach"])
    np.testing.assert_array_equal(loaded.encode_image(features), features)
    predicted = loaded.encode_text(texts).numpy()
    assert predicted.shape == (2, 1280) and (predicted >= 0).all()  # ReLU output
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    np.testing.assert_allclose(loaded.score(features, texts), unit(features) @ unit(predicted).T, atol=1e-5)


def numpy_similarity(name, images, texts):
    """W2VV's retrieval similarities (Sec. III-C) in float64 NumPy:
    [n_images, n_texts]."""
    images, texts = images.astype(np.float64), texts.astype(np.float64)
    if name == "cosine":  # an all-zero (ReLU) prediction is at cosine 0
        def unit(x):
            norms = np.linalg.norm(x, axis=1, keepdims=True)
            return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
        return unit(images) @ unit(texts).T
    if name == "dot":
        return images @ texts.T
    # -(1/D) ||x - y||^2, expanded (float64 keeps it exact to ~1e-12 here;
    # the [n, m, D] difference would not fit).
    squares = (images**2).sum(axis=1)[:, None] + (texts**2).sum(axis=1)[None, :] - 2 * images @ texts.T
    return -squares / images.shape[1]


@pytest.mark.slow  # over 10 s on 2 cores
def test_retrieval_similarity_is_an_evaluation_time_option(trained_w2vv, tmp_path, monkeypatch):
    """`evaluate.py --set model.similarity=...`: the scores the evaluation
    ranks are the chosen similarity of the features and the predicted
    visual vectors, in NumPy from the model's encodings; its R@1 are
    those of that matrix. Settings that change weights are refused."""
    split = load_precomp(EMBEDDED_DATA, "test")
    scorer = scoring.CheckpointScorer.from_model_dir(trained_w2vv)
    images, texts = scorer.encode_images(split.images), scorer.encode_texts(split.captions)
    caption_image = np.asarray(split.caption_image)
    i2t_blocks, t2i_blocks = [], []
    annotation_ranks, retrieval_ranks = metrics.image_annotation_ranks, metrics.image_retrieval_ranks

    def record_i2t(sims, caption_image, rows=None):
        i2t_blocks.append(np.array(sims))
        return annotation_ranks(sims, caption_image, rows)

    def record_t2i(sims, caption_image):
        t2i_blocks.append(np.array(sims))
        return retrieval_ranks(sims, caption_image)

    monkeypatch.setattr(metrics, "image_annotation_ranks", record_i2t)
    monkeypatch.setattr(metrics, "image_retrieval_ranks", record_t2i)
    results = {}
    for similarity in ("cosine", "dot", "neg_mse"):
        i2t_blocks.clear()
        t2i_blocks.clear()
        out = tmp_path / f"{similarity}.json"
        argv = ["--model-dir", str(trained_w2vv), "--set", f"model.similarity={similarity}", "--json", str(out)]
        assert evaluate.main(argv) == 0
        results[similarity] = evaluated_metrics(out)
        expected = numpy_similarity(similarity, images, texts)
        scale = np.abs(expected).max()
        for ranked in (np.concatenate(i2t_blocks), np.concatenate(t2i_blocks, axis=1)):
            assert ranked.shape == (1000, 5000)
            np.testing.assert_allclose(ranked, expected, rtol=1e-5, atol=1e-6 * scale, err_msg=similarity)
        # R@1 of that matrix, each direction.
        i2t_r1 = 100 * np.mean(caption_image[expected.argmax(axis=1)] == np.arange(1000))
        t2i_r1 = 100 * np.mean(expected.argmax(axis=0) == caption_image)
        assert (results[similarity]["i2t_r1"], results[similarity]["t2i_r1"]) == pytest.approx((i2t_r1, t2i_r1))
    # The run's own test (cosine, Sec. III-C's choice) is the default's.
    expected = json.loads((trained_w2vv / "results.json").read_text())["test"]
    assert results["cosine"]["rsum"] == pytest.approx(expected["rsum"], abs=1e-6)
    assert evaluate.main(["--model-dir", str(trained_w2vv), "--set", "train.epochs=3"]) == 2
    # A setting that changes the weights is refused, not half-restored.
    for change in ("model.hidden_units=[8]", 'model.scales=["bow","gru"]'):
        assert evaluate.main(["--model-dir", str(trained_w2vv), "--set", change]) == 2


def test_query_composition_adds_and_subtracts_predicted_visual_vectors(w2vv_export):
    scorer = w2vv_export
    image = load_precomp(EMBEDDED_DATA, "test").images[:2]
    composed = scoring.compose_query(scorer, image, add=["cat"], subtract=["dog"])
    # Word2VisualVec's images encode as their features; the texts' predicted
    # visual vectors straight from the SavedModel, not via the scorer.
    dog, cat = scorer.loaded.encode_text(tf.constant(["dog", "cat"])).numpy()
    np.testing.assert_allclose(composed, image - dog + cat, atol=1e-6)
    np.testing.assert_allclose(scoring.compose_query(scorer, image, add="cat"), image + cat, atol=1e-6)
    np.testing.assert_array_equal(scoring.compose_query(scorer, image), image)


def test_gru_branch_computes_real_tokens_only_and_equals_the_padded_gru():
    """Random training batches: the packed GRU branch gives the padded
    Keras GRU's encodings, loss and gradients (1e-5), at small sizes. In
    training, with dropout, see tests/layers/test_packed_gru.py (the same
    masks)."""
    model, _ = quick_model("w2vv", ["model.gru_units=16", "model.hidden_units=[16]"])
    config = registry.get("w2vv").experiment("quick", [])
    # Outside training: no dropout (whose random masks differ between the
    # two GRUs), gradients by autodiff of the packed loop.
    assert_packed_equals_padded(model, "gru", paper_batches(model, config, 2), training=False)


def test_forward_flops_count_the_grus_real_tokens_and_the_mlp():
    model, _ = quick_model("w2vv")
    token_ids = np.zeros((2, 40), np.int32)
    token_ids[0, :35] = 5  # the GRU reads the first 32
    token_ids[1, :3] = 7
    config = model.config
    units, hidden = config.gru_units, config.hidden_units[0]
    gru = 35 * 2 * 3 * units * (config.word_dim + units)
    sentence_vector = model.sentence_vector(tf.constant(token_ids)).shape[1]
    mlp = 2 * 2 * (sentence_vector * hidden + hidden * 1280)
    assert model.forward_flops(token_ids, None) == gru + mlp
