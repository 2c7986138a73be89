"""Every registered model: forward and backward pass, a gradient for every
trainable variable, no NaN (timm's `test_models.py` in spirit)."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from common.config import valid_values
from data.image_features import ImageFeatures
from data.tokenizer import TOKENIZERS, tokenize_strings
from data.word_vectors import WordVectors
from models import registry, vse, vse_config, w2vv, w2vv_config
from models.base_config import ModelConfig

VOCABULARY = ["<pad>", "<unk>", "a", "dog", "runs", "on", "the", "grass", "."]
# Small sizes for whichever of these fields a model's config has.
TINY = {"word_dim": 8, "embed_dim": 16, "gru_units": 16, "hidden_units": [16], "feature_maps": [8, 8, 8]}


def tiny_model(name):
    """The model at tiny sizes, its word vectors set as training sets them."""
    spec = registry.get(name)
    fields = {field.name for field in dataclasses.fields(spec.config_class)}
    config = spec.experiment("paper", [f"model.{k}={v}" for k, v in TINY.items() if k in fields])
    model = spec.build_model(config.model, VOCABULARY, ImageFeatures("fc", 12))
    words = VOCABULARY[2:-1]  # "." has no vector
    vectors = WordVectors.in_memory(words, np.random.default_rng(0).normal(size=(len(words), TINY["word_dim"])), "tiny")
    model.set_word_vectors(vectors, seed=0)
    return model

# Every model but the ensembles and the two-stage model, which are built
# from trained runs (their `parts`: tests/models/test_composite.py, test_ensemble.py, test_rerank.py).
SINGLE_MODELS = [name for name in registry.names() if registry.get(name).parts is None]


# The names a config's setting takes, declared without TensorFlow, and the table of the functions or layers
# they choose in the TensorFlow module: every name has one, every one a name.
NAMED_CHOICES = {
    "tokenizer": (valid_values(ModelConfig, "tokenizer")["choices"], TOKENIZERS),
    "vse hinge": (vse_config.HINGE_NAMES, vse.HINGE_LOSSES),
    "vse similarity": (valid_values(vse_config.VSEConfig, "similarity")["choices"], vse.SIMILARITIES),
    "vse image input": (valid_values(vse_config.VSEConfig, "image_input")["choices"], vse.IMAGE_INPUTS),
    "w2vv similarity": (valid_values(w2vv_config.W2VVConfig, "similarity")["choices"], w2vv.SIMILARITIES),
    "w2vv loss": (valid_values(w2vv_config.W2VVConfig, "loss")["choices"], ("mse", *w2vv.HINGE_LOSSES)),
}


@pytest.mark.parametrize("names, table", NAMED_CHOICES.values(), ids=NAMED_CHOICES.keys())
def test_each_name_a_config_takes_has_what_it_chooses(names, table):
    assert sorted(names) == sorted(table)


def batch(size=4, seed=0):
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(2, len(VOCABULARY), size=(size, 6)).astype(np.int32)
    token_ids[0, 3:] = 0  # one short caption
    return tf.constant(rng.normal(size=(size, 12)), tf.float32), tf.constant(token_ids)


@pytest.mark.parametrize("name", SINGLE_MODELS)
def test_forward_backward_every_variable_gets_a_gradient(name):
    model = tiny_model(name)
    images, token_ids = batch()
    if not model.trainable_variables:  # fitted in closed form: no loss to differentiate
        sims = model.similarity(model.encode_image(images), model.encode_text(token_ids))
        assert sims.shape == (4, 4) and np.all(np.isfinite(sims))
        with pytest.raises(TypeError, match=r"is fitted \(fit_split\), not trained by gradients"):
            model.pair_loss(model.encode_image(images), model.encode_text(token_ids), tf.range(4))
        return
    with tf.GradientTape() as tape:
        image_encodings = model.encode_image(images, training=True)
        text_encodings = model.encode_text(token_ids, training=True)
        loss = model.pair_loss(image_encodings, text_encodings, tf.range(4))
    sims = model.similarity(image_encodings, text_encodings)
    assert sims.shape == (4, 4)
    assert np.isfinite(loss) and np.all(np.isfinite(sims))
    gradients = tape.gradient(loss, model.trainable_variables)
    for variable, gradient in zip(model.trainable_variables, gradients):
        assert gradient is not None, f"{name}: no gradient for {variable.path}"
        dense = tf.convert_to_tensor(gradient).numpy()
        assert np.all(np.isfinite(dense)) and np.any(dense != 0), f"{name}: dead gradient for {variable.path}"


@pytest.mark.parametrize("name", SINGLE_MODELS)
def test_padding_does_not_change_text_encodings(name):
    model = tiny_model(name)
    _, token_ids = batch()
    padded = tf.pad(token_ids, [[0, 0], [0, 5]])
    np.testing.assert_allclose(model.encode_text(padded), model.encode_text(token_ids), atol=1e-6)
    # A batch of one takes other CPU kernels than a batch of several: on an
    # AVX-512 machine rcn's routing moves the encoding by up to 9e-5, while a
    # pad token read as a word moves every model that masks by 0.02 or more.
    alone = model.encode_text(token_ids[:1, :3])
    np.testing.assert_allclose(alone, model.encode_text(token_ids)[:1], atol=1e-3)


@pytest.mark.parametrize("name", SINGLE_MODELS)
def test_raw_strings_go_through_the_models_vectorizer(name):
    model = tiny_model(name)
    texts = ["A dog runs on the grass.", "the zebra"]
    ids = model.vectorizer(tf.constant(texts)).numpy()
    # The model's own tokenizer (tested against its reference in
    # tests/data/test_tokenizer.py), then the vocabulary, unknown words 1.
    tokens = tokenize_strings(texts, model.vectorizer.tokenizer)
    expected = [[VOCABULARY.index(t) if t in VOCABULARY else 1 for t in row] for row in tokens]
    assert ids.shape == (2, max(map(len, expected)))
    for row, want in zip(ids, expected):
        np.testing.assert_array_equal(row[: len(want)], want)
        assert not row[len(want) :].any()
    assert expected[1] == [6, 1]


@pytest.mark.parametrize("name", SINGLE_MODELS)
def test_a_checkpoint_holds_every_weight(name, tmp_path):
    # A layer TF's object graph cannot see (e.g. held in a Python list)
    # would be silently neither saved nor restored.
    model = tiny_model(name)
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
    stored = tf.train.load_checkpoint(path).get_variable_to_shape_map()
    saved = sum(1 for key in stored if key.startswith("model/"))
    assert saved == len(model.weights), f"{name}: {saved} of {len(model.weights)} weights in the checkpoint"
