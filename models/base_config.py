"""The base classes of every model's config (`ModelConfig`,
`VocabularyConfig`), without TensorFlow: a family's config class derives
from one of them in its registering module (`models.registry`); and the
experiment's configuration that holds one (`ExperimentConfig`), declared
here once."""

import dataclasses

from common.config import RuntimeConfig, TrainConfig, setting
from data.splits import DataConfig

# The names of `data.tokenizer.TOKENIZERS`, whose module loads TensorFlow.
TOKENIZER_NAMES = ("treebank", "alnum")


@dataclasses.dataclass
class ModelConfig:
    """The settings of every model config that the shared code reads; each
    family's config class derives from it and sets its paper's defaults.

    Attributes:
      tokenizer: how captions are split into words, a name of
        `data.tokenizer.TOKENIZERS` (the trainer checks every caption with
        it before training).
      word_vectors: pretrained word vectors for the word embedding: None,
        "word2vec" (skip-gram trained on the training captions, `word_dim`
        wide) or a vector file (see `data.word_vectors.for_model`).
      word_dim: the word vector size.
    """

    tokenizer: str = setting("treebank", choices=TOKENIZER_NAMES)
    word_vectors: str | None = None
    word_dim: int = setting(300, minimum=1)


@dataclasses.dataclass
class VocabularyConfig(ModelConfig):
    """A `ModelConfig` whose vocabulary is built from the frequent training
    words (`models.registry.default_vocabulary`).

    Attributes:
      vocab_min_count: keep training words seen at least this often.
      vocab_max_size: keep at most this many words, the most frequent
        (None = no limit).
    """

    vocab_min_count: int = setting(1, minimum=1)
    vocab_max_size: int | None = setting(None, minimum=1)


@dataclasses.dataclass
class ExperimentConfig:
    """What an experiment is set to: a registered model and its four
    sections of settings (`common.config`). Built by
    `models.registry.ModelSpec.experiment` from a preset and `--set`
    values, or read from a run's config.json
    (`models.experiments.RunConfig`).

    Attributes:
      model_name: the registered model (`train.py --model`).
      preset: the preset it started from.
      model: the model's own config class (its paper's defaults).
      train: how it is trained.
      data: what it reads.
      runtime: how the run uses the machine.
    """

    model_name: str
    preset: str
    model: ModelConfig
    train: TrainConfig
    data: DataConfig
    runtime: RuntimeConfig = dataclasses.field(default_factory=RuntimeConfig)
