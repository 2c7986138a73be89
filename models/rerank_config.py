"""The two-stage model's settings (`models.rerank`): its config class and
the `rerank` registration, without TensorFlow, so a command's flags are
checked before TensorFlow loads (`models.registry`)."""

import dataclasses

from common.config import setting
from models import members, registry
from models.base_config import ModelConfig


@dataclasses.dataclass
class RerankConfig(ModelConfig):
    """Settings of a two-stage model.

    Attributes:
      members: two run directories (train.py's --model-dir): the first
        stage (a joint-space model) and the second stage (any model).
      k: the list length of each query, in both directions; None = chosen
        on the dev split (see `models.rerank`).
      k_grid: the list lengths the dev choice tries, smallest first.
      k_margin: how far below the full re-ranking's dev rsum the chosen
        k's may be (rsum points).
    """

    members: tuple[str, ...] = ()
    k: int | None = setting(None, minimum=1)
    k_grid: tuple[int, ...] = setting((1, 2, 5, 10, 20, 50, 100, 200, 500), minimum=1)
    k_margin: float = setting(1.0, minimum=0)


registry.register(
    members.composite_spec("rerank", RerankConfig, registry.deferred("models.rerank:build"),
                           parts=members.rerank_stages, prepare=members.prepare_rerank)
)
