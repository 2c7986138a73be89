import numpy as np
import tensorflow as tf

from layers.hinge_losses import MaxOfHinges, SumOfHinges
from models import registry
from tests.models.test_registered_models import VOCABULARY, batch


def build(*overrides):
    spec = registry.get("gru")
    config = spec.experiment("paper", ["model.word_dim=8", "model.embed_dim=16", *overrides])
    return spec.build_model(config.model, VOCABULARY, image_dim=12)


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
