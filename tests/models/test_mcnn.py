"""m-CNN (Ma et al. 2015): the factorised network against a literal
transcription of eqs. 3-9, the loss against eq. 10, blocked scoring, the
ensemble, and the trained models' evaluation and export."""

import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf

from data.image_features import ImageFeatures
from engine import evaluation, runtime
from models import registry
from models.mcnn_config import IMAGE_LAYER, VARIANTS
from models.restore import restore_model
from tests.helpers import MIXED_TOLERANCE, random_token_ids, randomize_weights, skip_where_bfloat16_crashes

VOCABULARY_SIZE = 40
IMAGE_DIM = 12


def random_model(variant, seed=0, **overrides):
    """An m-CNN at small sizes with every weight random (biases included)."""
    spec = registry.get(f"mcnn-{variant}")
    config = spec.experiment("paper", ["model.word_dim=6", "model.embed_dim=7", "model.feature_maps=[16,20,24]",
                                       "model.hidden_units=[12]", "model.dropout=0"]).model
    config = dataclasses.replace(config, **overrides)
    tokens = ["<pad>", "<unk>", *(f"w{i}" for i in range(VOCABULARY_SIZE - 2))]
    return randomize_weights(spec.build_model(config, tokens, ImageFeatures("fc", IMAGE_DIM)), seed)


def assert_same_scores(got, want):
    """Scores of one network computed another way: a block or batch of
    another size (for which oneDNN may pick kernels that sum in another
    order, differently on AVX2 and AVX-512) or a float64 transcription. A
    score passes five float32 sums of at most 60 terms (25, 48, 60, 48 and
    12): about 200 unit roundoffs (2^-24) of the terms' magnitudes, which
    grow with the largest score, not with the score at hand; 1e-5 of the
    largest (170 of them) covers it."""
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def token_ids(lengths, seed=0):
    """int32 [n, max(lengths)], caption i with lengths[i] real words."""
    return random_token_ids(lengths, VOCABULARY_SIZE, seed)


def literal_score(model, image_features, ids, variant=None):
    """Eqs. 1-9 for one (image, sentence) pair, as the paper writes them:
    every window concatenated (with the image at the multimodal layer, zero
    where the window starts on padding), convolved, gated by the literal
    g(x) = 0 iff x == 0, ReLU, max-pooled over 2; then the MLP. `variant`
    (default: the model's) says where the image enters."""
    cfg = model.config
    variant = variant or cfg.variant
    relu = lambda x: np.maximum(x, 0)  # noqa: E731
    ids = list(ids[ids != 0][: cfg.max_length]) + [0] * cfg.max_length
    ids = np.array(ids[: cfg.max_length])
    sequence = model.word_embedding.embeddings.numpy()[ids] * (ids != 0)[:, None]  # zero vectors padded
    for dense in model.image_adapter.layers if cfg.image_adapter else []:
        image_features = relu(image_features @ dense.kernel.numpy() + dense.bias.numpy())
    image = relu(image_features @ model.image_projection.kernel.numpy() + model.image_projection.bias.numpy())
    image_layer = IMAGE_LAYER[variant]
    for layer in (1, 2, 3):
        conv = getattr(model, f"conv{layer}")
        if layer == image_layer:
            w = np.concatenate([conv.text_kernel.numpy().reshape(-1, conv.filters), conv.image_kernel.numpy()])
        else:
            w = conv.kernel.numpy().reshape(-1, conv.filters)
        outputs = []
        for i in range(len(sequence) - 2):
            window = np.concatenate(sequence[i : i + 3])  # eq. 4
            if layer == image_layer:  # eqs. 5 and 8
                window = np.concatenate([window, image if np.any(sequence[i] != 0) else np.zeros_like(image)])
            gate = 0.0 if np.all(window == 0) else 1.0  # eq. 6
            outputs.append(gate * relu(window @ w + conv.bias.numpy()))  # eq. 3
        outputs = np.array(outputs)
        sequence = np.maximum(outputs[0::2][: len(outputs) // 2], outputs[1::2][: len(outputs) // 2])  # eq. 7
    joint = sequence.reshape(-1)
    dense = [layer for layer in model.mlp.layers if hasattr(layer, "kernel")]
    if image_layer == IMAGE_LAYER["st"]:  # eq. 9: [nu_im || nu_st] into the MLP's hidden layer
        w = np.concatenate([model.joint.image_kernel.numpy(), model.joint.text_kernel.numpy()])
        joint = relu(np.concatenate([image, joint]) @ w + model.joint.bias.numpy())
    for layer in dense[:-1]:
        joint = relu(joint @ layer.kernel.numpy() + layer.bias.numpy())
    return float(joint @ dense[-1].kernel.numpy()[:, 0])  # eq. 2


@pytest.mark.parametrize("variant", VARIANTS)
def test_factorised_network_equals_the_literal_concatenate_then_convolve_equations(variant):
    model = random_model(variant, seed=VARIANTS.index(variant))
    ids = token_ids([1, 2, 3, 29, 30, 35])
    images = np.random.default_rng(1).uniform(0, 1, size=(3, IMAGE_DIM)).astype(np.float32)
    got = model.similarity(model.encode_image(images), model.encode_text(tf.constant(ids))).numpy()
    want = np.array([[literal_score(model, image, row) for row in ids] for image in images])
    assert np.abs(want).max() > 0.1
    assert_same_scores(got, want)


@pytest.mark.parametrize("variant", VARIANTS)
def test_padding_and_words_past_the_maximum_length_do_not_change_scores(variant):
    model = random_model(variant)
    ids = token_ids([4, 30, 7])
    images = model.encode_image(np.ones((2, IMAGE_DIM), np.float32))
    scores = model.similarity(images, model.encode_text(tf.constant(ids)))
    padded = np.pad(ids, [[0, 0], [0, 20]])
    padded[1, 30:40] = 5  # words 31-40 of the 30-word caption are cut
    np.testing.assert_array_equal(model.similarity(images, model.encode_text(tf.constant(padded))), scores)


@pytest.mark.parametrize("variant", VARIANTS)
def test_blocked_similarity_equals_one_block_and_aligned_pairs_are_its_diagonal(variant):
    model = random_model(variant)
    image_encodings = model.encode_image(np.random.default_rng(2).uniform(size=(7, IMAGE_DIM)).astype(np.float32))
    text_encodings = model.encode_text(tf.constant(token_ids([3, 9, 1, 14, 6, 30, 2, 5, 11, 8, 4])))
    whole = model.similarity(image_encodings, text_encodings).numpy()
    assert whole.shape == (7, 11)
    per_pair = 12 if variant == "st" else {"wd": 14 * 16, "phs": 6 * 20, "phl": 2 * 24}[variant]
    model.config = dataclasses.replace(model.config, max_block_elements=per_pair * 9)  # blocks of 3 x 3
    assert_same_scores(model.similarity(image_encodings, text_encodings).numpy(), whole)
    aligned = model.score_pairs(image_encodings, text_encodings[:7]).numpy()
    assert_same_scores(aligned, np.diag(whole[:, :7]))


@pytest.mark.parametrize("variant, seed, negatives", [("phs", 0, 1), ("phs", 0, 2), ("st", 1, 1)])
def test_pair_loss_is_eq_10_both_ways_on_the_batch_neighbours(variant, seed, negatives):
    model = random_model(variant, seed, negatives_per_pair=negatives)
    images = np.random.default_rng(3).uniform(size=(6, IMAGE_DIM)).astype(np.float32)
    ids = token_ids([3, 9, 1, 14, 6, 2])
    image_encodings = model.encode_image(images)
    text_encodings = model.encode_text(tf.constant(ids))
    image_index = np.array([0, 1, 1, 2, 3, 4])  # pairs 1 and 2 share an image
    # The scores of eq. 10 from the literal eqs. 1-9 (no dropout: rate 0),
    # of both signs.
    sims = np.array([[literal_score(model, image, row) for row in ids] for image in images])
    assert sims.min() < 0 < sims.max()
    hinges = []
    for k in range(6):
        for shift in range(1, negatives + 1):
            m = (k + shift) % 6
            if image_index[m] == image_index[k]:
                continue
            hinges.append(max(0, 0.5 - sims[k, k] + sims[k, m]))  # a wrong sentence for image k
            hinges.append(max(0, 0.5 - sims[k, k] + sims[m, k]))  # a wrong image for sentence k
    assert 0 < np.count_nonzero(hinges) < len(hinges)
    loss = model.pair_loss(image_encodings, text_encodings, tf.constant(image_index))
    np.testing.assert_allclose(float(loss), sum(hinges) / 6, rtol=1e-5)


@pytest.mark.parametrize("variant, negatives", [("phl", "batch"), ("phl", "hardest"), ("st", "batch"), ("st", "hardest")])
def test_pair_loss_on_every_pair_of_the_batch_is_eq_10_averaged_or_at_the_hardest(variant, negatives):
    model = random_model(variant, seed=2, negatives=negatives)
    images = np.random.default_rng(5).uniform(size=(6, IMAGE_DIM)).astype(np.float32)
    ids = token_ids([3, 9, 1, 14, 6, 2], seed=1)
    image_index = np.array([0, 1, 1, 2, 3, 4])  # pairs 1 and 2 share an image
    sims = np.array([[literal_score(model, image, row) for row in ids] for image in images])
    hardest, average, hinges = [], [], []
    for k in range(6):
        others = [m for m in range(6) if image_index[m] != image_index[k]]
        wrong_sentences = [max(0, 0.5 - sims[k, k] + sims[k, m]) for m in others]  # image k, sentence m
        wrong_images = [max(0, 0.5 - sims[k, k] + sims[m, k]) for m in others]  # sentence k, image m
        hardest.append(max(wrong_sentences) + max(wrong_images))
        average.append((sum(wrong_sentences) + sum(wrong_images)) / len(others))
        hinges += wrong_sentences + wrong_images
    # Inputs where some hinges are 0 and the two readings differ.
    assert 0 < np.count_nonzero(hinges) < len(hinges)
    assert abs(np.mean(hardest) - np.mean(average)) > 0.05
    per_positive = hardest if negatives == "hardest" else average
    loss = model.pair_loss(model.encode_image(images), model.encode_text(tf.constant(ids)), tf.constant(image_index))
    np.testing.assert_allclose(float(loss), np.mean(per_positive), rtol=1e-5)


def test_pair_loss_modes_differ_on_the_same_batch():
    """The three readings of "non-matching pairs" are different losses on
    one batch (a guard that the switch reaches the loss)."""
    images = np.random.default_rng(6).uniform(size=(5, IMAGE_DIM)).astype(np.float32)
    ids = tf.constant(token_ids([3, 9, 1, 14, 6], seed=2))
    losses = []
    for negatives in ("sampled", "batch", "hardest"):
        model = random_model("st", seed=3, negatives=negatives)
        losses.append(float(model.pair_loss(model.encode_image(images), model.encode_text(ids), tf.range(5))))
    assert len({round(loss, 6) for loss in losses}) == 3


@pytest.mark.parametrize("variant", ["wd", "st"])
def test_image_adapter_is_a_relu_mlp_before_eq_1(variant):
    model = random_model(variant, seed=4, image_adapter=(9, 5))
    assert [dense.kernel.shape for dense in model.image_adapter.layers] == [(IMAGE_DIM, 9), (9, 5)]
    assert model.image_projection.kernel.shape == (5, 7)
    ids = token_ids([2, 5, 12])
    images = np.random.default_rng(7).uniform(-1, 1, size=(2, IMAGE_DIM)).astype(np.float32)
    got = model.similarity(model.encode_image(images), model.encode_text(tf.constant(ids))).numpy()
    want = np.array([[literal_score(model, image, row) for row in ids] for image in images])
    assert_same_scores(got, want)


def test_training_dropout_is_on_the_hidden_layer_of_each_pair():
    model = random_model("st", dropout=0.5)
    image_encodings = model.encode_image(np.ones((4, IMAGE_DIM), np.float32))
    text_encodings = model.encode_text(tf.constant(np.repeat(token_ids([3]), 4, axis=0)))
    evaluating = model.score_pairs(image_encodings, text_encodings).numpy()
    training = model.score_pairs(image_encodings, text_encodings, training=True).numpy()
    # Identical inputs, independent masks per pair; none in evaluation.
    assert np.ptp(evaluating) < 1e-6 and np.ptp(training) > 1e-3


def test_evaluation_scores_every_pair_exactly_once_and_ranks_as_the_whole_matrix(monkeypatch):
    model = random_model("wd")
    images = model.encode_image(np.random.default_rng(4).uniform(size=(30, IMAGE_DIM)).astype(np.float32)).numpy()
    texts = model.encode_text(tf.constant(token_ids(list(np.arange(150) % 31 + 1)))).numpy()
    caption_image = np.repeat(np.arange(30), 5)
    blocks = []

    def similarity(i, t):
        blocks.append(model.similarity(i, t).numpy())
        return blocks[-1]

    monkeypatch.setattr(evaluation, "IMAGE_BLOCK", 8)
    monkeypatch.setattr(evaluation, "CAPTION_BLOCK", 37)
    result = evaluation.evaluate_encodings(similarity, images, texts, caption_image,
                                           sentence_similarity=model.joint_space)
    assert [block.shape for block in blocks] == [(8, 150)] * 3 + [(6, 150)]
    # The blocks' scores are the whole matrix's to rounding; the metrics
    # are those of the scores the blocks gave, ranked as one matrix.
    scored = np.concatenate(blocks)
    assert_same_scores(scored, model.similarity(images, texts).numpy())
    from common.metrics import retrieval_metrics

    assert result == retrieval_metrics(scored, caption_image)


def test_ensemble_is_assembled_from_the_members_best_checkpoints(trained_mcnn_members, trained_mcnn_ens):
    # Sec. 4.3: the wd, phs, phl and st scores summed, unweighted and raw.
    config = json.loads((trained_mcnn_ens / "config.json").read_text())
    assert config["model"]["combination"] == "sum" and config["model"]["weights"] == [1.0] * 4
    assert config["model"]["members"] == [str(trained_mcnn_members[v]) for v in VARIANTS]
    _, ensemble = restore_model(trained_mcnn_ens)
    features = np.random.default_rng(6).uniform(size=(4, 1280)).astype(np.float32)
    texts = tf.constant(["a dog runs on the grass .", "two people sit at a table"])
    total = ensemble.similarity(ensemble.encode_image(features), ensemble.encode_text(texts)).numpy()
    members = []
    for variant, member_dir in trained_mcnn_members.items():
        _, member = restore_model(member_dir)
        ids = member.vectorizer(texts)
        members.append(member.similarity(member.encode_image(features), member.encode_text(ids)).numpy())
    np.testing.assert_allclose(total, sum(members), rtol=1e-5, atol=1e-5)


def _member_lookalike(tmp_path, name, member, model_name):
    """A directory with `member`'s vocabulary and a hand-written config.json
    of `model_name` (no checkpoint: it must be refused before one is read)."""
    directory = tmp_path / name
    directory.mkdir()
    (directory / "vocab.json").write_bytes((member / "vocab.json").read_bytes())
    config = {"version": 2, "model_name": model_name, "preset": "quick", "model": {"word_dim": 50},
              "image_features": {"kind": "fc", "width": 1280, "provenance": None}}
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def test_ensemble_refuses_missing_or_mismatched_members(trained_mcnn_members, tmp_path, capsys):
    import train

    members = [str(trained_mcnn_members[v]) for v in VARIANTS]
    no_vocabulary = tmp_path / "no-vocabulary"
    no_vocabulary.mkdir()
    (no_vocabulary / "config.json").write_bytes((trained_mcnn_members["phs"] / "config.json").read_bytes())
    # Another family's run with the members' very vocabulary.
    gru = _member_lookalike(tmp_path, "gru-run", trained_mcnn_members["phs"], "gru")
    unknown = _member_lookalike(tmp_path, "unknown-run", trained_mcnn_members["phl"], "no-such-model")
    cases = [
        (members[:3], "needs the model directories of its 4 members"),
        ([members[0], str(tmp_path), *members[2:]], f"{tmp_path}/config.json: no config.json"),
        ([members[0], str(no_vocabulary), *members[2:]], "no-vocabulary/vocab.json: file not found"),
        ([members[1], members[0], *members[2:]],
         (f"{members[1]}/config.json: a 'mcnn-phs' run; the ensemble's wd member (model.members) "
          "must be a directory trained with --model mcnn-wd")),
        ([members[0], str(gru), *members[2:]],
         (f"{gru}/config.json: a 'gru' run; the ensemble's phs member (model.members) "
          "must be a directory trained with --model mcnn-phs")),
        ([*members[:2], str(unknown), members[3]], f"{unknown}/config.json: model_name 'no-such-model': unknown model"),
    ]
    for i, (given, message) in enumerate(cases):
        argv = ["--model", "mcnn-ens", "--preset", "quick", "--model-dir", str(tmp_path / f"ens{i}"),
                "--set", f"model.members={','.join(given)}"]
        assert train.main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
        # Refused before the run's directory is written.
        assert not (tmp_path / f"ens{i}").exists()


@pytest.mark.parametrize("variant", VARIANTS)
def test_under_mixed_bfloat16_the_network_computes_in_bfloat16_close_to_the_equations(variant):
    skip_where_bfloat16_crashes()
    model = random_model(variant, seed=VARIANTS.index(variant))
    with runtime.dtype_policy("bf16"):
        mixed = random_model(variant)
    mixed.set_weights(model.get_weights())
    assert {v.dtype for v in mixed.weights} == {"float32"}
    ids = token_ids([1, 2, 3, 29, 30, 35])
    images = np.random.default_rng(1).uniform(0, 1, size=(3, IMAGE_DIM)).astype(np.float32)
    image_encodings, text_encodings = mixed.encode_image(images), mixed.encode_text(tf.constant(ids))
    assert image_encodings.dtype == text_encodings.dtype == tf.bfloat16
    got = tf.cast(mixed.similarity(image_encodings, text_encodings), tf.float32).numpy()
    want = np.array([[literal_score(model, image, row) for row in ids] for image in images])
    tolerance = MIXED_TOLERANCE["mixed_bfloat16"]
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance * np.abs(want).max())
    with tf.GradientTape() as tape:
        loss = mixed.pair_loss(mixed.encode_image(images[[0, 1, 2, 0]]),
                               mixed.encode_text(tf.constant(ids[:4])), tf.constant([0, 1, 2, 0]))
    assert loss.dtype == tf.float32 and np.isfinite(loss.numpy()) and loss.numpy() > 0
    gradients = tape.gradient(loss, mixed.trainable_variables)
    assert all(g is not None for g in gradients)
