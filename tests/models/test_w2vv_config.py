"""Word2VisualVec's settings (`models.w2vv_config`): Sec. III and IV-A's
values (and the public code's where the paper gives none) in the `paper`
presets of `w2vv` and its three single-scale models, what the `quick`
presets change, the checks of a config (the scales and the word vectors
they need, the choices and ranges of its settings), and that the module
registers those four names (the network itself is
tests/models/test_w2vv.py's)."""

import dataclasses

import pytest

from common.errors import InputError
from data.embedded import EMBEDDED_GLOVE_50D
from models import registry
from models.w2vv_config import W2VVConfig
from tests.models.test_base_config import registered_by

# Each model and its scales, in the order of eq. 4's concatenation.
SCALES = {"w2vv": ("bow", "word2vec", "gru"), "w2vv-bow": ("bow",), "w2vv-word2vec": ("word2vec",),
          "w2vv-gru": ("gru",)}


@pytest.mark.parametrize("name", SCALES)
def test_the_paper_preset_holds_the_paper_s_sizes_and_training(name):
    config = registry.get(name).experiment("paper")
    model, train = config.model, config.train
    assert model.scales == SCALES[name]
    # Sec. IV-A: 500-d word2vec, a 1,024-d GRU, three layers with a 2,048-d hidden one; words seen fewer than five
    # times left out of BoW; Sec. III-C: MSE (eq. 8), cosine similarity at retrieval.
    assert (model.word_dim, model.gru_units, model.hidden_units, model.vocab_min_count) == (500, 1024, (2048,), 5)
    assert (model.loss, model.similarity, model.word_vectors, model.vocab_max_size) == (
        "mse", "cosine", "word2vec", None)
    # Sec. III-B: RMSprop at 1e-4 with eps 1e-6 (squared, as Keras 3 adds it inside the root), the rate halved after
    # three epochs without improvement, early stopping after ten, at most 100 epochs.
    assert (train.optimizer, train.learning_rate, train.optimizer_epsilon) == ("rmsprop", 1e-4, pytest.approx(1e-6**2))
    assert (train.plateau_patience, train.lr_decay_factor, train.early_stopping_patience, train.epochs) == (
        3, 0.5, 10, 100)
    # The public code's: its tokenizer, 32 GRU tokens, dropout 0.2, batches of 100, a clip norm of 5, selection
    # by image-to-text mAP, U(-1, 1) rows for words without a vector.
    assert (model.tokenizer, model.max_gru_tokens, model.dropout, model.missing_word_init) == ("alnum", 32, 0.2, 1.0)
    assert (train.batch_size, train.grad_clip_norm, train.selection_metric) == (100, 5.0, "i2t_map")


@pytest.mark.parametrize("name", SCALES)
def test_the_quick_preset_reads_glove_50d_into_a_512_unit_gru_at_lr_1e_3(name):
    spec = registry.get(name)
    paper, quick = spec.experiment("paper"), spec.experiment("quick")
    assert quick.model == dataclasses.replace(paper.model, word_vectors=EMBEDDED_GLOVE_50D, word_dim=50,
                                              gru_units=512)
    assert quick.train == dataclasses.replace(paper.train, learning_rate=1e-3, epochs=10, bucket_by_length=True)
    assert quick.data == paper.data


@pytest.mark.parametrize("scales", [(), ("bow", "bow"), ("gru", "bow", "gru")])
def test_scales_must_be_distinct_and_at_least_one(scales):
    with pytest.raises(ValueError) as error:
        W2VVConfig(scales=scales)
    assert str(error.value) == f"scales must be distinct values of ('bow', 'word2vec', 'gru'), got {list(scales)}"


def test_the_word2vec_scale_needs_word_vectors_and_the_others_do_not():
    with pytest.raises(ValueError, match="^the word2vec scale needs word_vectors .a file or 'word2vec'.$"):
        W2VVConfig(scales=("bow", "word2vec"), word_vectors=None)
    assert W2VVConfig(scales=("gru", "bow"), word_vectors=None).scales == ("gru", "bow")


@pytest.mark.parametrize("override, message", [
    ("model.scales=[\"bow\",\"tfidf\"]", "model.scales must be one of bow, word2vec, gru; got 'tfidf'"),
    ("model.gru_units=0", "model.gru_units must be >= 1; got 0"),
    ("model.max_gru_tokens=0", "model.max_gru_tokens must be >= 1; got 0"),
    ("model.hidden_units=[2048,0]", "model.hidden_units must be >= 1; got 0"),
    ("model.dropout=1", "model.dropout must be < 1; got 1.0"),
    ("model.dropout=-0.1", "model.dropout must be >= 0; got -0.1"),
    ("model.loss=hinge", "model.loss must be one of mse, hinge_sum, hinge_max; got 'hinge'"),
    ("model.margin=-1", "model.margin must be >= 0; got -1.0"),
    ("model.similarity=l2", "model.similarity must be one of cosine, dot, neg_mse; got 'l2'"),
    ("model.max_vector_words=0", "model.max_vector_words must be >= 1; got 0"),
    ("model.missing_word_init=-0.5", "model.missing_word_init must be >= 0; got -0.5"),
])
def test_a_setting_out_of_its_range_or_choices_is_refused(override, message):
    with pytest.raises(InputError) as error:
        registry.get("w2vv").experiment("paper", [override])
    assert str(error.value) == message


def test_the_edges_of_the_ranges_and_the_ranking_ablation_are_taken():
    config = registry.get("w2vv").experiment("paper", [
        "model.hidden_units=[1]", "model.dropout=0", "model.loss=hinge_max", "model.margin=0",
        "model.similarity=neg_mse", "model.max_vector_words=1", "model.missing_word_init=0"]).model
    assert (config.hidden_units, config.dropout, config.loss, config.margin) == ((1,), 0.0, "hinge_max", 0.0)
    assert (config.similarity, config.max_vector_words, config.missing_word_init) == ("neg_mse", 1, 0.0)


def test_the_module_registers_w2vv_and_its_three_single_scale_models():
    names = [spec.name for spec in registered_by("models.w2vv_config")]
    assert names == list(registry.FAMILIES["models.w2vv_config"]) == list(SCALES)
