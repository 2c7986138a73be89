import keras
import numpy as np
import pytest
import tensorflow as tf

from data.image_features import ImageFeatures
from data.readers import load_precomp
from layers.hinge_losses import MaxOfHinges, SumOfHinges
from models import registry
from tests.helpers import EMBEDDED_DATA
from tests.models.test_registered_models import VOCABULARY, batch


def build(*overrides):
    spec = registry.get("gru")
    config = spec.experiment("paper", ["model.word_dim=8", "model.embed_dim=16", *overrides])
    return spec.build_model(config.model, VOCABULARY, ImageFeatures("fc", 12))


def test_encodings_are_unit_vectors_and_similarity_is_their_dot_product():
    model = build()
    images, token_ids = batch()
    image_encodings, text_encodings = model.encode_image(images), model.encode_text(token_ids)
    np.testing.assert_allclose(np.linalg.norm(image_encodings, axis=1), 1, rtol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(text_encodings, axis=1), 1, rtol=1e-5)
    np.testing.assert_allclose(model.similarity(image_encodings, text_encodings),
                               image_encodings.numpy() @ text_encodings.numpy().T, atol=1e-6)


def test_text_encoding_is_the_normalised_last_valid_gru_state():
    model = build()
    _, token_ids = batch()
    words = model.word_embedding(token_ids[:1, :3])
    # Re-run the GRU step by step with the layer's own cell.
    state = [tf.zeros([1, 16])]
    for t in range(3):
        output, state = model.sentence_encoder.cell(words[:, t], state)
        state = state if isinstance(state, (list, tuple)) else [state]
    expected = output / np.linalg.norm(output, axis=1, keepdims=True)
    np.testing.assert_allclose(model.encode_text(token_ids[:1]), expected, atol=1e-5)


def test_hinge_choice_and_reduction_come_from_the_config():
    assert isinstance(build().hinge, MaxOfHinges)
    summed = build("model.hinge=sum", "model.loss_reduction=mean").hinge
    assert isinstance(summed, SumOfHinges) and summed.reduction == "mean"


def test_max_length_cuts_captions():
    model = build("model.max_length=2")
    ids = model.vectorizer(tf.constant(["a dog runs on the grass"]))
    np.testing.assert_array_equal(ids, [[2, 3]])


def paper_batches(model, config, count):
    """The first training batches of a paper-preset epoch on the embedded
    Flickr8k: random captions, padded to each batch's longest."""
    from data import pipeline

    data = pipeline.tokenize_split(load_precomp(EMBEDDED_DATA, "train"), model.vectorizer)
    order = pipeline.epoch_order(data, config.train.sampling, config.train.batch_size, config.train.seed, 0, False)
    return list(pipeline.training_dataset(data, order[:count]))


def encodings_loss_and_gradients(model, variables, batch, training):
    """The text encodings, the loss, and its gradients for `variables`."""
    with tf.GradientTape() as tape:
        images = model.encode_image(batch["image_features"], training=training)
        texts = model.encode_text(batch["token_ids"], training=training)
        loss = model.pair_loss(images, texts, batch["image_index"])
    return texts, loss, tape.gradient(loss, variables)


def assert_packed_equals_padded(model, attribute, batches, training=True):
    """Swaps the model's PackedGRU `attribute` for a Keras GRU of the same
    configuration and weights (every padded step computed): encodings,
    loss and gradients agree at 1e-5 (in training: the packed GRU's
    written-out backward pass)."""
    packed = getattr(model, attribute)
    others = [v for v in model.trainable_variables if not any(v is w for w in packed.trainable_variables)]
    results = [encodings_loss_and_gradients(model, others + packed.trainable_variables, b, training) for b in batches]
    padded = keras.layers.GRU.from_config(keras.layers.GRU.get_config(packed))
    padded.build((None, None, packed.cell.kernel.shape[0]))
    padded.set_weights(packed.get_weights())
    setattr(model, attribute, padded)
    for training_batch, (texts, loss, gradients) in zip(batches, results):
        padded_texts, padded_loss, padded_gradients = encodings_loss_and_gradients(
            model, others + padded.trainable_variables, training_batch, training
        )
        np.testing.assert_allclose(texts, padded_texts, atol=1e-5)
        np.testing.assert_allclose(loss, padded_loss, rtol=1e-5)
        assert len(gradients) == len(padded_gradients)
        for g, e in zip(gradients, padded_gradients):
            np.testing.assert_allclose(tf.convert_to_tensor(g), tf.convert_to_tensor(e), atol=1e-5)


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)])
def test_paper_batches_encode_and_lose_as_the_padded_gru(seed):
    """The paper preset's random batches (padding efficiency about 0.5):
    the GRU computing real tokens only gives the padded computation's
    encodings, loss and gradients (1e-5), at the paper's sizes."""
    spec = registry.get("gru")
    config = spec.experiment("paper", [f"train.seed={seed}"])
    vocabulary = spec.vocabulary(config.model, load_precomp(EMBEDDED_DATA, "train").captions, None)
    keras.utils.set_random_seed(seed)
    model = spec.build_model(config.model, vocabulary, ImageFeatures("fc", 1280))
    batches = paper_batches(model, config, 2)
    lengths = np.count_nonzero(batches[0]["token_ids"], axis=1)
    assert lengths.mean() / lengths.max() < 0.7  # much of the batch is padding
    assert_packed_equals_padded(model, "sentence_encoder", batches)


def test_forward_flops_count_the_grus_real_tokens_and_the_image_map():
    model = build()  # words 8, GRU 16, images 12
    token_ids = np.array([[2, 3, 0, 0], [4, 5, 6, 7], [0, 0, 0, 0]])
    gru = 6 * 2 * 3 * 16 * (8 + 16)  # 6 real tokens, input and recurrent products
    image_map = 3 * 2 * 12 * 16
    assert model.forward_flops(token_ids, np.zeros((3, 12))) == gru + image_map
