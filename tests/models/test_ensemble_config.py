"""The ensemble's settings (`models.ensemble_config`): its defaults, the
checks a value from `--set` or a config.json meets (the combinations, the
weights, the grid's step, the quantiles), and the `ensemble` registration
with its presets (the fit is tests/models/test_ensemble.py's, the members'
checks tests/models/test_members.py's)."""

import pytest

from common.errors import InputError
from models import registry
from models.ensemble_config import EnsembleConfig
from tests.models.test_base_config import registered_by


def test_the_defaults_standardise_the_scores_and_choose_the_weights_on_a_grid_of_tenths():
    # docs/ensemble.md: zscore by default, weights chosen on dev over the simplex grid of step 0.1 unless given,
    # the rank combination from 4,096 quantiles.
    config = EnsembleConfig()
    assert (config.members, config.combination, config.weights, config.weight_step, config.quantiles) == (
        (), "zscore", (), 0.1, 4096)


@pytest.mark.parametrize("override, message", [
    ("model.combination=mean", "model.combination must be one of zscore, rank, sum; got 'mean'"),
    ("model.weights=[0.5,-0.5]", "model.weights must be >= 0; got -0.5"),
    ("model.weight_step=0", "model.weight_step must be > 0; got 0.0"),
    ("model.weight_step=1.5", "model.weight_step must be <= 1; got 1.5"),
    ("model.quantiles=1", "model.quantiles must be >= 2; got 1"),
])
def test_a_setting_out_of_its_range_or_choices_is_refused(override, message):
    with pytest.raises(InputError) as error:
        registry.get("ensemble").experiment("paper", [override])
    assert str(error.value) == message


@pytest.mark.parametrize("step, divides", [(0.3, False), (0.4, False), (0.25, True), (0.05, True), (1 / 3, True)])
def test_a_weight_step_must_divide_one_before_anything_is_fitted(step, divides):
    spec = registry.get("ensemble")
    if divides:
        assert spec.experiment("paper", [f"model.weight_step={step!r}"]).model.weight_step == step
    else:
        with pytest.raises(InputError, match=f"weight_step: 1 / {step:g} is not a whole number"):
            spec.experiment("paper", [f"model.weight_step={step!r}"])


def test_every_combination_and_the_edges_of_the_ranges_are_taken():
    spec = registry.get("ensemble")
    for combination in ("zscore", "rank", "sum"):
        assert spec.experiment("paper", [f"model.combination={combination}"]).model.combination == combination
    config = spec.experiment("paper", ["model.weights=[0,1]", "model.weight_step=1", "model.quantiles=2",
                                       "model.members=runs/a,runs/b"]).model
    assert (config.weights, config.weight_step, config.quantiles, config.members) == (
        (0.0, 1.0), 1.0, 2, ("runs/a", "runs/b"))


def test_the_quick_preset_is_the_paper_one():
    # Nothing to size down: an ensemble costs what its members cost.
    spec = registry.get("ensemble")
    paper, quick = spec.experiment("paper"), spec.experiment("quick")
    assert (quick.model, quick.train, quick.data) == (paper.model, paper.train, paper.data)
    assert quick.preset == "quick"


def test_the_module_registers_ensemble_alone():
    names = [spec.name for spec in registered_by("models.ensemble_config")]
    assert names == list(registry.FAMILIES["models.ensemble_config"]) == ["ensemble"]
