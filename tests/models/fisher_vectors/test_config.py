"""The Fisher-vector models' settings (`models.fisher_vectors.config`):
Table 1's encodings and the mixtures each needs, Klein et al.'s values (and
the authors' code's where the paper gives none) in the `paper` presets of
the five `fv-*` models that the package registers with this config, what
their `quick` presets change, and the checks of a config (the fit itself is
tests/models/fisher_vectors/test_model.py's)."""

import dataclasses

import pytest

from common.errors import InputError
from data.embedded import EMBEDDED_GLOVE_50D
from models import registry
from models.fisher_vectors.config import ENCODINGS, FVConfig
from tests.models.test_base_config import registered_by

# Table 1's rows: the mean vector baseline, a Fisher vector of each mixture, and GMM+HGLMM's two concatenated.
MIXTURES = {"mean": (), "gmm": ("gaussian",), "lmm": ("laplacian",), "hglmm": ("hybrid",),
            "gmm-hglmm": ("gaussian", "hybrid")}


def test_each_encoding_of_table_1_fits_its_mixtures():
    assert ENCODINGS == MIXTURES


@pytest.mark.parametrize("encoding", MIXTURES)
def test_the_paper_preset_holds_the_paper_s_settings(encoding):
    config = registry.get(f"fv-{encoding}").experiment("paper")
    model = config.model
    # Sec. 5: K = 30 components, ICA on the 300-d word2vec vectors (the user's file: GoogleNews cannot ship).
    assert (model.encoding, model.num_components, model.ica, model.word_dim, model.word_vectors) == (
        encoding, 30, True, 300, None)
    # Where the paper is silent, the authors' code: ICA and mixtures fitted on a 300,000-word sample, 10 EM
    # iterations, CCA dimensions scaled by r; the ridge "selected ... based on the validation data", from a log grid
    # 1e-5 ... 1e-1; a Treebank tokenizer and every word of the vector file.
    assert (model.ica_sample, model.em_iterations, model.cca_weight_power) == (300_000, 10, 1.0)
    assert model.cca_etas == (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
    assert (model.tokenizer, model.max_vector_words) == ("treebank", None)
    # Nothing is trained by gradients: one pass fits it.
    assert config.train.epochs == 1


@pytest.mark.parametrize("encoding", MIXTURES)
def test_the_quick_preset_reads_the_embedded_glove_50d_vectors(encoding):
    spec = registry.get(f"fv-{encoding}")
    paper, quick = spec.experiment("paper"), spec.experiment("quick")
    assert quick.model == dataclasses.replace(paper.model, word_vectors=EMBEDDED_GLOVE_50D, word_dim=50)
    assert (quick.train, quick.data) == (paper.train, paper.data)


def test_a_config_without_a_ridge_to_try_is_refused():
    with pytest.raises(ValueError, match="^cca_etas must list at least one ridge$"):
        FVConfig(cca_etas=())
    with pytest.raises(InputError, match="^model config: cca_etas must list at least one ridge$"):
        registry.get("fv-gmm").experiment("paper", ["model.cca_etas=[]"])


@pytest.mark.parametrize("override, message", [
    ("model.encoding=vlad", "model.encoding must be one of mean, gmm, lmm, hglmm, gmm-hglmm; got 'vlad'"),
    ("model.max_vector_words=0", "model.max_vector_words must be >= 1; got 0"),
    ("model.ica_sample=1", "model.ica_sample must be >= 2; got 1"),
    ("model.num_components=0", "model.num_components must be >= 1; got 0"),
    ("model.em_iterations=0", "model.em_iterations must be >= 1; got 0"),
    ("model.cca_etas=[0.001,-0.1]", "model.cca_etas must be >= 0; got -0.1"),
    ("model.cca_weight_power=-1", "model.cca_weight_power must be >= 0; got -1.0"),
])
def test_a_setting_out_of_its_range_or_choices_is_refused(override, message):
    with pytest.raises(InputError) as error:
        registry.get("fv-gmm").experiment("paper", [override])
    assert str(error.value) == message


def test_the_edges_of_the_ranges_are_taken():
    config = registry.get("fv-gmm").experiment("paper", [
        "model.max_vector_words=1", "model.ica_sample=2", "model.num_components=1", "model.em_iterations=1",
        "model.cca_etas=[0]", "model.cca_weight_power=0", "model.ica=false"]).model
    assert (config.max_vector_words, config.ica_sample, config.num_components, config.em_iterations) == (1, 2, 1, 1)
    assert (config.cca_etas, config.cca_weight_power, config.ica) == ((0.0,), 0.0, False)


def test_the_package_registers_one_model_of_each_encoding():
    names = [spec.name for spec in registered_by("models.fisher_vectors")]
    assert names == list(registry.FAMILIES["models.fisher_vectors"]) == [f"fv-{encoding}" for encoding in MIXTURES]
