import numpy as np
import pytest
import tensorflow as tf

from data.image_features import ImageFeatures
from engine.export import export_saved_model
from layers.full_network_embedding import FullNetworkEmbedding
from models import registry
from tests.layers.test_hinge_losses import reference_loss
from tests.layers.test_order_violation_similarity import numpy_order_similarity
from tests.models.test_registered_models import VOCABULARY

VARIANTS = ("sh", "mh", "soe", "moe", "ph", "poe")
RNG = np.random.default_rng(0)


def tiny(name, *overrides):
    spec = registry.get(name)
    config = spec.experiment("paper", ["model.word_dim=8", "model.embed_dim=16", *overrides])
    return spec.build_model(config.model, VOCABULARY, ImageFeatures("fc", 12))


def test_table_1_flickr8k_columns():
    def row(name, preset="paper"):
        c = registry.get(name).experiment(preset)
        m, t = c.model, c.train
        return (m.hinge, m.similarity, m.embed_dim, m.word_dim, t.learning_rate, m.margin, m.absolute, t.epochs)

    assert row("sh") == ("sum", "cosine", 1536, 1024, 2e-4, 0.2, False, 200)
    assert row("mh") == ("max", "cosine", 1024, 1024, 2e-4, 0.2, False, 400)
    assert row("soe") == ("sum", "order", 1024, 1024, 1e-3, 0.05, True, 200)
    assert row("moe") == ("max", "order", 1536, 1536, 1e-3, 0.05, True, 200)
    assert row("ph") == ("sum-max", "cosine", 1536, 1024, 2e-4, 0.2, False, 200)
    assert row("poe") == ("sum-max", "order", 1024, 1024, 1e-3, 0.05, True, 200)
    assert registry.get("poe").experiment("paper").train.phase_learning_rates == (1e-4,)
    assert row("sh", "bl-coco") == ("sum", "cosine", 2048, 2000, 2.5e-4, 0.2, False, 200)
    assert row("moe", "bl") == ("max", "order", 1024, 300, 2e-4, 0.2, False, 200)
    assert row("mh", "coco")[2:4] == (2048, 1024)
    # Sec. 4.3.1: 200 epochs, MH 400 on Flickr8k and Flickr30k only.
    assert [row("mh", preset)[-1] for preset in ("f30k", "coco", "bl", "bl-coco")] == [400, 200, 400, 200]
    # The quick preset: small sizes, each variant's loss, similarity and learning rate; MH, which takes off
    # late from scratch, trains 40 epochs, the others 10.
    assert row("mh", "quick") == ("max", "cosine", 512, 300, 2e-4, 0.2, False, 40)
    assert row("moe", "quick") == ("max", "order", 512, 300, 1e-3, 0.05, True, 10)
    assert [row(name, "quick")[-1] for name in ("sh", "soe", "ph", "poe")] == [10] * 4
    for name in VARIANTS:
        c = registry.get(name).experiment("paper")
        assert (c.train.batch_size, c.train.grad_clip_norm, c.train.sampling) == (128, 2.0, "one_caption_per_image")
        assert (c.model.image_bias, c.model.image_input, c.model.loss_reduction) == (False, "unit", "sum")


@pytest.mark.parametrize("name", VARIANTS)
def test_export_scores_with_the_variants_own_similarity(name, tmp_path):
    model = tiny(name)
    features = RNG.uniform(0, 2, size=(3, 12)).astype(np.float32)
    captions = ["a dog runs on the grass .", "the dog", "grass"]
    export_saved_model(model, tmp_path / "export")
    loaded = tf.saved_model.load(str(tmp_path / "export"))
    images = loaded.encode_image(features).numpy()
    texts = loaded.encode_text(tf.constant(captions)).numpy()
    config = registry.get(name).experiment("paper").model
    if config.similarity == "order":
        expected = numpy_order_similarity(images, texts)
        assert images.min() >= 0 and texts.min() >= 0  # absolute value
    else:
        expected = images @ texts.T
    np.testing.assert_allclose(loaded.score(features, tf.constant(captions)), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(images, model.encode_image(features), atol=1e-6)


def test_image_map_is_linear_on_unit_features():
    model = tiny("sh")
    assert model.image_projection.bias is None
    features = RNG.uniform(0, 2, size=(2, 12)).astype(np.float32)
    # fc features are L2-normalised first, so their scale does not matter.
    np.testing.assert_allclose(model.encode_image(features), model.encode_image(5 * features), atol=1e-6)


def test_fne_input_uses_training_statistics_inside_the_export(tmp_path):
    model = tiny("sh", "model.image_input=fne")
    assert isinstance(model.image_input, FullNetworkEmbedding)
    training_features = RNG.normal(loc=4, scale=3, size=(40, 12)).astype(np.float32)
    model.adapt(training_features)
    np.testing.assert_allclose(model.image_input.mean, training_features.mean(axis=0), rtol=1e-5)
    export_saved_model(model, tmp_path / "export")
    loaded = tf.saved_model.load(str(tmp_path / "export"))
    raw = training_features[:5]
    np.testing.assert_allclose(loaded.encode_image(raw), model.encode_image(raw), atol=1e-6)
    z = (raw - training_features.mean(axis=0)) / training_features.std(axis=0)
    fne = np.select([z < -0.25, z > 0.15], [-1.0, 1.0], 0.0)
    np.testing.assert_array_equal(model.image_input(raw), fne)


def test_curriculum_variants_have_two_phases():
    for name in VARIANTS:
        model = tiny(name)
        assert model.num_phases == (2 if name in ("ph", "poe") else 1)


@pytest.mark.parametrize("name", ["ph", "poe"])
def test_curriculum_sums_the_hinges_then_keeps_the_hardest_negative(name):
    """Sec. 3.5: phase 0 trains on eq. 1 (the sum of hinges), phase 1 on
    eq. 4 (the max), each with the variant's similarity and margin; the
    phase changes after 10 validations without improvement (docs/fne.md;
    3 in the quick preset)."""
    model = tiny(name)
    images = np.abs(RNG.normal(size=(5, 16)))
    texts = np.abs(RNG.normal(size=(5, 16)))
    images, texts = (x / np.linalg.norm(x, axis=1, keepdims=True) for x in (images, texts))
    if name == "poe":
        sims, margin = numpy_order_similarity(images, texts), 0.05
    else:
        sims, margin = images @ texts.T, 0.2
    image_index = tf.range(5)
    for phase, hardest in ((0, False), (1, True)):
        model.start_phase(phase)
        loss = model.pair_loss(tf.constant(images, tf.float32), tf.constant(texts, tf.float32), image_index)
        np.testing.assert_allclose(loss, reference_loss(sims, margin, hardest), rtol=1e-5)
    assert registry.get(name).experiment("paper").train.phase_patience == 10
    assert registry.get(name).experiment("quick").train.phase_patience == 3


def test_moe_loss_is_eq_4_over_eq_3_of_absolute_unit_embeddings():
    """MOE end to end against a NumPy transcription: image map without bias
    on L2-normalised features, L2 norm, absolute value (Table 1), the order
    violation of eq. 3 and the max of hinges of eq. 4 at margin 0.05."""
    model = tiny("moe")
    features = RNG.uniform(0, 2, size=(6, 12)).astype(np.float32)
    captions = ["a dog runs", "two dogs", "a man on a bike", "grass", "the dog runs on grass", "a bike"]
    images = model.encode_image(features).numpy()
    texts = model.encode_text(model.vectorizer(tf.constant(captions))).numpy()

    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    expected_images = np.abs(unit(unit(features) @ model.image_projection.kernel.numpy()))
    np.testing.assert_allclose(images, expected_images, rtol=1e-5, atol=1e-6)
    assert texts.min() >= 0
    np.testing.assert_allclose(np.linalg.norm(texts, axis=1), 1.0, rtol=1e-5)
    loss = model.pair_loss(tf.constant(images), tf.constant(texts), tf.range(6))
    np.testing.assert_allclose(loss, reference_loss(numpy_order_similarity(images, texts), 0.05, hardest=True),
                               rtol=1e-5)


def test_collapsed_moe_embeddings_are_a_stationary_point_costing_2_b_margin():
    """docs/fne.md, "MOE at chance with one-layer features": when every image
    and every caption has the same embedding, every order violation is 0, so
    each of the 2B hardest hinges is the margin (loss 2 * B * 0.05, 12.8 at
    B = 128: the plateau of the failed runs) and the gradient is exactly 0
    (d S / d c = -2 max(0, c - i) = 0), so the max of hinges cannot leave it."""
    model = tiny("moe")
    batch = 128
    point = np.abs(RNG.normal(size=16))
    point /= np.linalg.norm(point)
    images = tf.Variable(np.tile(point, (batch, 1)), dtype=tf.float32)
    texts = tf.Variable(np.tile(point, (batch, 1)), dtype=tf.float32)
    with tf.GradientTape() as tape:
        loss = model.pair_loss(tf.convert_to_tensor(images), tf.convert_to_tensor(texts), tf.range(batch))
    np.testing.assert_allclose(loss, 2 * batch * 0.05, rtol=1e-6)
    for gradient in tape.gradient(loss, [images, texts]):
        assert np.count_nonzero(gradient.numpy()) == 0
