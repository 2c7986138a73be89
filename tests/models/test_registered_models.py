"""Every registered model: forward and backward pass, a gradient for every
trainable variable, no NaN (timm's `test_models.py` in spirit)."""

import numpy as np
import pytest
import tensorflow as tf

from models import registry

VOCABULARY = ["<pad>", "<unk>", "a", "dog", "runs", "on", "the", "grass", "."]
TINY = ["model.word_dim=8", "model.embed_dim=16"]


def tiny_model(name):
    spec = registry.get(name)
    config = spec.experiment("paper", TINY)
    return spec.build_model(config.model, VOCABULARY, image_dim=12)


def batch(size=4, seed=0):
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(2, len(VOCABULARY), size=(size, 6)).astype(np.int32)
    token_ids[0, 3:] = 0  # one short caption
    return tf.constant(rng.normal(size=(size, 12)), tf.float32), tf.constant(token_ids)


@pytest.mark.parametrize("name", registry.names())
def test_forward_backward_every_variable_gets_a_gradient(name):
    model = tiny_model(name)
    images, token_ids = batch()
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


@pytest.mark.parametrize("name", registry.names())
def test_padding_does_not_change_text_encodings(name):
    model = tiny_model(name)
    _, token_ids = batch()
    padded = tf.pad(token_ids, [[0, 0], [0, 5]])
    np.testing.assert_allclose(model.encode_text(padded), model.encode_text(token_ids), atol=1e-6)
    alone = model.encode_text(token_ids[:1, :3])
    np.testing.assert_allclose(alone, model.encode_text(token_ids)[:1], atol=1e-6)


@pytest.mark.parametrize("name", registry.names())
def test_raw_strings_go_through_the_models_vectorizer(name):
    model = tiny_model(name)
    ids = model.vectorizer(tf.constant(["A dog runs on the grass.", "the zebra"]))
    np.testing.assert_array_equal(ids, [[2, 3, 4, 5, 6, 7, 8], [6, 1, 0, 0, 0, 0, 0]])
