"""The two-stage model's settings (`models.rerank_config`): its defaults,
the checks a value from `--set` or a config.json meets (the list length,
its grid and margin), and the `rerank` registration with its presets (the
fit is tests/models/test_rerank.py's, the stages' checks
tests/models/test_members.py's)."""

import pytest

from common.errors import InputError
from models import registry
from models.rerank_config import RerankConfig
from tests.models.test_base_config import registered_by


def test_the_defaults_choose_k_on_dev_from_the_documented_grid():
    # docs/rerank.md: the smallest k of 1, 2, 5, ..., 500 within 1.0 rsum of the full re-ranking on dev.
    config = RerankConfig()
    assert (config.members, config.k, config.k_margin) == ((), None, 1.0)
    assert config.k_grid == (1, 2, 5, 10, 20, 50, 100, 200, 500)


@pytest.mark.parametrize("override, message", [
    ("model.k=0", "model.k must be >= 1; got 0"),
    ("model.k_grid=[5,0,10]", "model.k_grid must be >= 1; got 0"),
    ("model.k_margin=-1", "model.k_margin must be >= 0; got -1.0"),
])
def test_a_setting_out_of_its_range_is_refused(override, message):
    with pytest.raises(InputError) as error:
        registry.get("rerank").experiment("paper", [override])
    assert str(error.value) == message


def test_a_fixed_k_and_the_edges_of_the_ranges_are_taken():
    config = registry.get("rerank").experiment("paper", ["model.k=1", "model.k_grid=[1]", "model.k_margin=0",
                                                         "model.members=runs/first,runs/second"]).model
    assert (config.k, config.k_grid, config.k_margin, config.members) == (1, (1,), 0.0, ("runs/first", "runs/second"))
    assert registry.get("rerank").experiment("paper", ["model.k=null"]).model.k is None


def test_the_quick_preset_is_the_paper_one():
    # Nothing to size down: a two-stage model costs what its stages cost.
    spec = registry.get("rerank")
    paper, quick = spec.experiment("paper"), spec.experiment("quick")
    assert (quick.model, quick.train, quick.data) == (paper.model, paper.train, paper.data)
    assert quick.preset == "quick"


def test_the_module_registers_rerank_alone():
    names = [spec.name for spec in registered_by("models.rerank_config")]
    assert names == list(registry.FAMILIES["models.rerank_config"]) == ["rerank"]
