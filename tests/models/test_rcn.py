import keras
import numpy as np
import pytest
import tensorflow as tf

from data import pipeline, readers
from data.image_features import ImageFeatures
from engine.train_step import make_optimizer, make_train_step
from layers.capsule_gru import CapsuleGRU
from layers.capsule_mask_regularization import CapsuleMaskRegularization
from models import registry
from models.rcn import ROUTINGS, RecurrentCapsuleEncoder
from tests.helpers import EMBEDDED_DATA, run_layer_test
from tests.layers.test_capsule_gru import numpy_gru, padded_loop
from tests.layers.test_capsule_mask_regularization import numpy_eq_14
from tests.layers.test_capsule_routing import numpy_routing
from tests.models.test_registered_models import VOCABULARY, batch

RNG = np.random.default_rng(0)
MASK = np.array([[True] * 6, [True, True, True, False, False, False], [True] * 5 + [False]])


def words(size=3, length=6, dim=5):
    return tf.constant(RNG.normal(size=(size, length, dim)), tf.float32)


def test_encoder_layer_contract():
    # The non-negative routing: its eq. 9 denominators are at least
    # ||v_i||^2, so bf16 rounding stays within the mixed-precision tolerance.
    # The literal routing's can nearly cancel on random weights (about one
    # draw in three here), amplifying rounding without bound; its values
    # are checked in float32 against the transcription below.
    run_layer_test(RecurrentCapsuleEncoder, {"units": 6, "num_capsules": 2, "recursions": 1, "regularization": 0.05,
                                             "routing": "nonnegative"},
                   (words(), tf.constant(MASK)), expected_output_shape=(3, 6))


def test_one_capsule_and_no_recursion_is_a_plain_gru():
    encoder = RecurrentCapsuleEncoder(7, num_capsules=1, recursions=0, regularization=0)
    x = words()
    output = encoder(x, mask=MASK)
    assert [v.path.split("/")[-2] for v in encoder.weights] == ["embedding_grus"] * 3
    gru = encoder.embedding_grus
    keras_gru = keras.layers.GRU(7, reset_after=False)
    keras_gru(x)
    # Keras writes eq. 4 with 1 - z: negate the update gate's weights.
    flip = np.concatenate([-np.ones(7), np.ones(14)]).astype(np.float32)
    keras_gru.set_weights([gru.kernel[0] * flip, gru.recurrent_kernel[0] * flip, gru.bias[0, 0] * flip])
    np.testing.assert_allclose(output, keras_gru(x, mask=MASK), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("routing, regularized_masks", [
    ("literal", "routed"), ("literal", "own"), ("nonnegative", "routed"), ("nonnegative", "own")])
def test_encoder_against_a_numpy_transcription_of_the_recursion(routing, regularized_masks):
    """Eqs. 5-10 for T + 1 passes from all-ones masks, and eq. 14 on the
    last pass's routed masks m^(T) or the capsules' own masks m~^(T),
    recomputed from the encoder's weights."""
    capsules, recursions, weight = 3, 2, 0.05
    encoder = RecurrentCapsuleEncoder(4, num_capsules=capsules, recursions=recursions, regularization=weight,
                                      routing=routing, regularized_masks=regularized_masks)
    x = words()
    output = encoder(x, mask=MASK).numpy()
    sigmoid = lambda a: 1 / (1 + np.exp(-a))  # noqa: E731
    nonnegative = routing == "nonnegative"

    def gru(layer, n, sequence, valid, act):
        return numpy_gru(layer.kernel[n].numpy(), layer.recurrent_kernel[n].numpy(), layer.bias[n, 0].numpy(),
                         sequence, valid, act)

    penalties, conditions = [], []
    for b in range(len(x)):
        sentence, valid = x[b].numpy().astype(np.float64), MASK[b]
        masks = np.ones((capsules, sentence.shape[1]))
        # How much float32 rounding may grow: the condition number of the
        # sums of agreements that eqs. 9-10 divide by, sum |a| / |sum a|,
        # over the passes (1 when the routing clips agreements at 0).
        condition = 1.0
        for t in range(recursions + 1):
            v = np.array([gru(encoder.embedding_grus, i, masks[i] * sentence, valid, np.tanh) for i in range(capsules)])
            agreements = np.maximum(v @ v.T, 0) if nonnegative else v @ v.T
            condition = max(condition, np.max(np.abs(agreements).sum(1) / np.abs(agreements.sum(1))),
                            np.abs(agreements).sum() / abs(agreements.sum()))
            if t == recursions:
                break
            candidates = np.array([gru(encoder.mask_grus, i, masks[i] * sentence, valid, sigmoid)
                                   for i in range(capsules)])
            _, masks = numpy_routing(v, candidates, nonnegative)
        penalties.append(numpy_eq_14(masks if regularized_masks == "routed" else candidates))
        if nonnegative:
            assert np.all((masks > 0) & (masks < 1))
        embedding, _ = numpy_routing(v, np.zeros_like(v), nonnegative)
        np.testing.assert_allclose(output[b], embedding, rtol=1e-4 * condition, atol=1e-5 * condition)
        conditions.append(condition)
    [loss] = encoder.losses
    np.testing.assert_allclose(loss, weight * np.mean(penalties), rtol=1e-4 * max(conditions))


@pytest.mark.parametrize("routing", ROUTINGS)
def test_packed_capsule_grus_train_the_encoder_as_the_padded_loop_on_real_captions(routing, monkeypatch):
    """In training on real captions of mixed lengths (all T + 1 passes, the
    routing and the regulariser), the capsule GRUs computing real words
    only give the encodings, loss and gradients (word vectors and every
    weight) of the padded loop of eqs. 1-4 (`padded_loop`), at 1e-5. Two
    capsules and two recursions: a middle pass whose mask GRUs read masked
    words and feed the next pass's masks, as in the paper's five passes."""
    spec = registry.get("rcn")
    config = spec.experiment("paper", ["model.word_dim=8", "model.embed_dim=16", "model.num_capsules=2",
                                       "model.recursions=2", f"model.routing={routing}"])
    captions = readers.load_precomp(EMBEDDED_DATA, "dev").captions[:12]
    vocabulary = ["<pad>", "<unk>", *sorted({w for c in captions for w in c.lower().split()})]
    keras.utils.set_random_seed(0)
    model = spec.build_model(config.model, vocabulary, ImageFeatures("fc", 12))
    token_ids = model.vectorizer(tf.constant(captions))
    model.encode_text(token_ids)
    encoder = model.sentence_encoder
    for grus in (encoder.embedding_grus, encoder.mask_grus):
        grus.bias.assign(RNG.normal(scale=0.5, size=grus.bias.shape))
    variables = [model.word_embedding.embeddings, *encoder.trainable_variables]

    def encodings_loss_and_gradients():
        with tf.GradientTape() as tape:
            encodings = model.encode_text(token_ids, training=True)
            [regularizer] = model.losses
            loss = tf.reduce_sum(encodings * tf.cos(tf.range(16, dtype=tf.float32))) + regularizer
        return [encodings, loss, *(tf.convert_to_tensor(g) for g in tape.gradient(loss, variables))]

    packed = encodings_loss_and_gradients()
    monkeypatch.setattr(CapsuleGRU, "call", lambda self, inputs, mask=None, training=None: padded_loop(self, inputs, mask))
    padded = encodings_loss_and_gradients()
    assert len(packed) == len(padded) == 2 + 7
    for got, expected in zip(packed, padded):
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_no_regularizer_without_lambda():
    encoder = RecurrentCapsuleEncoder(4, num_capsules=2, recursions=1, regularization=0)
    encoder(words(), mask=MASK)
    assert encoder.losses == [] and not any(isinstance(layer, CapsuleMaskRegularization)
                                            for layer in encoder._flatten_layers())


def tiny(name, *overrides):
    spec = registry.get(name)
    config = spec.experiment("paper", ["model.word_dim=8", "model.embed_dim=16", *overrides])
    return spec.build_model(config.model, VOCABULARY, ImageFeatures("fc", 12))


@pytest.mark.parametrize("name", ["rcn", "rcn-0"])
def test_gradients_reach_every_capsule_of_both_grus(name):
    model = tiny(name)
    images, token_ids = batch()
    with tf.GradientTape() as tape:
        loss = model.pair_loss(model.encode_image(images), model.encode_text(token_ids), tf.range(4))
        loss += sum(model.losses)
    variables = model.sentence_encoder.trainable_variables
    assert len(variables) == 6  # kernel, recurrent kernel, bias of the embedding and mask GRUs
    for variable, gradient in zip(variables, tape.gradient(loss, variables)):
        per_capsule = np.abs(gradient.numpy()).reshape(4, -1).sum(axis=1)
        assert np.all(np.isfinite(per_capsule)) and np.all(per_capsule > 0), variable.path


def train_on_dev(name, overrides, steps, batch_size=32):
    """`steps` training steps of a small registered model on the real dev
    captions and features; returns the model and every step's result."""
    spec = registry.get(name)
    config = spec.experiment("paper", ["model.word_dim=16", "model.embed_dim=32", "train.learning_rate=0.01",
                                       f"train.batch_size={batch_size}", *overrides])
    split = readers.load_precomp(EMBEDDED_DATA, "dev", "ims")
    vocabulary = ["<pad>", "<unk>", *sorted({w for c in split.captions[:500] for w in c.lower().split()})]
    keras.utils.set_random_seed(0)
    model = spec.build_model(config.model, vocabulary, ImageFeatures("fc", split.images.shape[1]))
    optimizer = make_optimizer(config.train)
    step = make_train_step(model, optimizer, tf.distribute.get_strategy(), config.train.grad_clip_norm)
    data = pipeline.tokenize_split(split, model.vectorizer)
    batches = pipeline.epoch_order(data, "all_captions", batch_size, seed=0, epoch=0)[:steps]
    results = [step(b) for b in pipeline.training_dataset(data, batches)]
    return model, [{"loss": float(r["loss"]), "grad_norm": float(r["grad_norm"]),
                    **{k: float(v) for k, v in r["diagnostics"].items()}} for r in results]


@pytest.mark.slow  # over 10 s on 2 cores
def test_training_on_real_data_stays_finite():
    """A high learning rate on real captions and features, with the
    regulariser on: losses and weights must stay finite."""
    model, results = train_on_dev("rcn", [], 40)
    losses = [r["loss"] for r in results]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert all(np.all(np.isfinite(v.numpy())) for v in model.trainable_variables)


def mask_range(results):
    return (min(v for r in results for k, v in r.items() if k.endswith("/mask_min")),
            max(v for r in results for k, v in r.items() if k.endswith("/mask_max")))


@pytest.mark.slow  # over 10 s on 2 cores
def test_nonnegative_routing_keeps_masks_in_0_1_on_real_data():
    """120 steps at 50x the paper's learning rate, the sum of hinges and
    clipping as in the quick preset: the non-negative variant's routed masks
    never leave (0, 1) (read from the diagnostics of every step), and its
    eq. 9 denominators never fall below ||v_i||^2; the literal routing's
    masks leave (0, 1) at once on the same batches."""
    overrides = ["model.hinge=sum", "train.grad_clip_norm=2"]
    _, results = train_on_dev("rcn-0", [*overrides, "model.routing=nonnegative"], 120, batch_size=25)
    assert len(results) == 120 and results[-1]["loss"] < results[0]["loss"] / 2
    assert len([k for k in results[0] if k.endswith("/mask_min")]) == 4  # passes 1-4
    low, high = mask_range(results)
    assert 0 < low and high < 1
    assert min(v for r in results for k, v in r.items() if k.endswith("relative_denominator")) >= 1 - 1e-5
    _, literal = train_on_dev("rcn-0", [*overrides, "model.routing=literal"], 20, batch_size=25)
    low, high = mask_range(literal)
    assert low < 0 or high > 1


@pytest.mark.parametrize("hinge, reduction, scale", [("max", "mean", 1), ("sum", "mean", 7), ("sum", "sum", 56)])
def test_lambda_is_scaled_with_the_ranking_loss(hinge, reduction, scale):
    """The training loss is pair_loss + scale * lambda * mean_b V, with scale
    1 for the paper's loss (eq. 15), B - 1 for the sum of hinges, times B
    for a sum over the batch (B = 8 here). Two capsules and one recursion:
    the regulariser's smallest encoder, cheap to trace."""
    model = tiny("rcn", f"model.hinge={hinge}", f"model.loss_reduction={reduction}", "model.num_capsules=2",
                 "model.recursions=1")
    images, token_ids = batch(size=8)
    image_index = tf.range(8, dtype=tf.int64)
    image_encodings, text_encodings = model.encode_image(images), model.encode_text(token_ids)
    [regularizer] = model.losses
    expected = model.pair_loss(image_encodings, text_encodings, image_index) + scale * regularizer
    optimizer = keras.optimizers.SGD(0.0)
    step = make_train_step(model, optimizer, tf.distribute.get_strategy())
    loss = step({"image_features": images, "token_ids": token_ids, "image_index": image_index})["loss"]
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    assert float(model.layer_loss_scale(8)) == scale


def test_forward_flops_count_every_pass_of_the_capsule_grus():
    spec = registry.get("rcn")
    config = spec.experiment("paper", ["model.word_dim=8", "model.embed_dim=16", "model.num_capsules=2",
                                       "model.recursions=1"]).model
    model = spec.build_model(config, VOCABULARY, ImageFeatures("fc", 12))
    images, token_ids = batch()
    model.encode_text(token_ids)  # builds the mask GRUs
    tokens = int(np.count_nonzero(token_ids))
    embedding = 2 * 2 * 3 * 16 * (8 + 16)  # 2 capsules, input 8, state 16
    mask = 2 * 2 * 3 * 8 * (8 + 8)  # states of the word size
    expected = tokens * (2 * embedding + mask) + 2 * 4 * 12 * 16
    assert model.forward_flops(token_ids.numpy(), images.numpy()) == expected
