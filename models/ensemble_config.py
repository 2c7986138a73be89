"""The ensemble's settings (`models.ensemble`): its config class and the
`ensemble` registration, without TensorFlow, so a command's flags are
checked before TensorFlow loads (`models.registry`)."""

import dataclasses
import math

from common.config import setting
from models import members, registry
from models.base_config import ModelConfig

COMBINATIONS = ("zscore", "rank", "sum")


@dataclasses.dataclass
class EnsembleConfig(ModelConfig):
    """Settings of an ensemble of trained runs.

    Attributes:
      members: the run directories (train.py's --model-dir) of the members,
        at least two.
      combination: "zscore", "rank" or "sum" (see `models.ensemble`).
      weights: one non-negative weight per member, fixed; empty = chosen on
        the dev split over the simplex grid.
      weight_step: the grid's step; 1 / weight_step must be a whole number.
      quantiles: how many quantiles of a member's dev scores the "rank"
        combination keeps (its resolution).
    """

    members: tuple[str, ...] = ()
    combination: str = setting("zscore", choices=COMBINATIONS)
    weights: tuple[float, ...] = setting((), minimum=0)
    weight_step: float = setting(0.1, above=0, maximum=1)
    quantiles: int = setting(4096, minimum=2)

    def __post_init__(self):
        if not divides_one(self.weight_step):
            raise ValueError(f"weight_step: 1 / {self.weight_step:g} is not a whole number; e.g. 0.1, 0.05 or 0.25")


def divides_one(step):
    """Whether 1 / `step` is a whole number (a grid step of the simplex)."""
    return math.isclose(round(1 / step) * step, 1.0, rel_tol=1e-9)


registry.register(
    members.composite_spec("ensemble", EnsembleConfig, registry.deferred("models.ensemble:build"),
                           parts=members.ensemble_members, prepare=members.prepare_ensemble)
)
