"""The registry of the zoo's models: `--model NAME` -> how to build and train it.

Each family's module registers its models when it is imported. `FAMILIES`
says which module registers which names, so a name is checked without
importing any family, nor TensorFlow (a mistyped `--model` is refused at
once), and `get` imports a family's module when one of its models is
first asked for.

A family's registering module holds its config class and presets and
imports no TensorFlow: it names the functions that need it (the model's
builder, its vocabulary) by `deferred` reference, imported when first
called. So a model's experiment config, with every `--set` value checked,
is made before TensorFlow loads (a mistake in a flag is refused at once).
"""

import dataclasses
import importlib
import json
from typing import Any, Callable

from common.config import TrainConfig, apply_overrides
from common.errors import InputError
from data.image_features import kind_name
from data.splits import DataConfig
from models.base_config import ExperimentConfig

# Each family's registering module and the `--model` names it registers (a
# test checks that importing them registers exactly these, and loads no
# TensorFlow).
FAMILIES = {
    "models.vse_config": ("gru",),
    "models.rcn_config": ("rcn", "rcn-0", "rcn-gru"),
    "models.fne_pipelines": ("sh", "mh", "soe", "moe", "ph", "poe"),
    "models.w2vv_config": ("w2vv", "w2vv-bow", "w2vv-word2vec", "w2vv-gru"),
    "models.mcnn_config": ("mcnn-wd", "mcnn-phs", "mcnn-phl", "mcnn-st", "mcnn-ens"),
    "models.ensemble_config": ("ensemble",),
    "models.rerank_config": ("rerank",),
    "models.fisher_vectors": ("fv-mean", "fv-gmm", "fv-lmm", "fv-hglmm", "fv-gmm-hglmm"),
}
_FAMILY_OF = {name: module for module, names in FAMILIES.items() for name in names}

def deferred(reference):
    """The function `reference` ("package.module:name") names, imported when
    first called: how a family's registering module names a function of
    its TensorFlow module (e.g. "models.vse:VSEModel")."""
    module, _, name = reference.partition(":")

    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__qualname__ = call.__name__ = reference
    return call


def default_vocabulary(config, train_captions, word_vectors=None):
    """The training words seen at least `config.vocab_min_count` times, at
    most `config.vocab_max_size` of them, tokenised by `config.tokenizer`
    (a `models.base.VocabularyConfig`)."""
    # Imported on use, as TensorFlow below: looking a name up loads neither.
    from data.vocabulary import Vocabulary

    return Vocabulary.build(
        train_captions, min_count=config.vocab_min_count, max_size=config.vocab_max_size,
        tokenizer=config.tokenizer,
    )


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """Everything `train.py` needs to know about one registered model.

    Attributes:
      name: the `--model` name.
      config_class: dataclass of the model's hyperparameters, whose defaults
        are its paper's.
      build: `build(config, vocabulary, image_dim) -> RetrievalModel`,
        where `vocabulary` is a `data.vocabulary.Vocabulary` and
        `image_dim` the width of the image features (`build_model` gives
        the built model their whole record); for a model made of trained
        runs (`parts` set), `build(config, parts, image_dim)`.
      vocabulary: `vocabulary(config, train_captions, word_vectors) ->
        Vocabulary`, the model's vocabulary from the training captions (and
        the word vectors, None unless `config.word_vectors` is set);
        `default_vocabulary` unless given.
      train: the paper's training settings.
      data: the paper's data settings.
      presets: named overrides (`{"section.field": value}`) applied on top
        of the config classes' defaults; "paper" is always available, and
        empty unless given (when one config class serves several variants,
        as the Vilalta et al. pipelines).
      image_features: the kinds of image features (`data.image_features`)
        the model can read besides "fc" (one CNN layer's features), each
        with the overrides (`{"section.field": value}`) that make the data
        and the model read it, e.g. "fne", the per-layer features of a
        Full-Network Embedding (`train.py --image-features KIND`).
      parts: for a model made of trained runs (an ensemble's members, a
        two-stage model's stages): `parts(config) ->
        tuple[models.members.TrainedRun, ...]`, those runs read from the
        directories its model `config` names and checked (before
        TensorFlow loads); `build` and `prepare` take them, so that a
        process reads them once. None for a model with weights of its own.
      prepare: `prepare(config, parts) -> config`, run on a new run's
        experiment config before any data is read: completes it from its
        `parts` and checks it against them (an ensemble: its image
        features, its dev split), or None.
    """

    name: str
    config_class: type
    build: Callable[..., Any]
    train: TrainConfig
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    presets: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    vocabulary: Callable[..., Any] = default_vocabulary
    image_features: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    parts: Callable[..., Any] | None = None
    prepare: Callable[..., Any] | None = None

    def experiment(self, preset="paper", overrides=(), image_features="fc"):
        """The experiment config of a preset and a kind of image features
        (see `image_features`), with `--set` overrides applied."""
        presets = {"paper": {}, **self.presets}
        if preset not in presets:
            raise InputError(
                f"--preset {preset!r}: model {self.name!r} has presets {', '.join(presets)}"
            )
        features = {"fc": {}, **self.image_features}
        image_features = kind_name(image_features)
        if image_features not in features:
            raise InputError(
                f"--image-features {image_features!r}: model {self.name!r} reads {', '.join(features)}"
            )
        config = ExperimentConfig(
            model_name=self.name,
            preset=preset,
            model=self.config_class(),
            train=dataclasses.replace(self.train),
            data=dataclasses.replace(self.data),
        )
        settings = {**presets[preset], **features[image_features]}
        return apply_overrides(config, [*(f"{k}={json.dumps(v)}" for k, v in settings.items()), *overrides])

    def build_model(self, model_config, vocabulary, image_features, parts=None):
        """The model with its weights created (by encoding a dummy pair),
        reading `image_features` (a `data.image_features.ImageFeatures`,
        which the model carries from then on, as its `image_features`);
        `vocabulary` is a `Vocabulary` or a plain token list. A model made
        of trained runs is built from `parts`, the runs its `parts` hook
        read (read here when not given; its vocabulary is not used)."""
        import tensorflow as tf

        from data.vocabulary import Vocabulary

        if self.parts:
            model = self.build(model_config, self.parts(model_config) if parts is None else parts, image_features.width)
        else:
            if not isinstance(vocabulary, Vocabulary):
                vocabulary = Vocabulary(vocabulary)
            model = self.build(model_config, vocabulary, image_features.width)
        model.image_features = image_features
        model.encode_image(tf.zeros([1, image_features.width]))
        model.encode_text(model.vectorizer(tf.constant(["a"])))
        return model


_REGISTRY: dict[str, ModelSpec] = {}


def register(spec):
    """Adds a model; registering a name twice is an error."""
    if spec.name in _REGISTRY:
        raise ValueError(f"model {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    return spec


def get(name, source="--model"):
    """The `ModelSpec` of `name`; an unknown name is an `InputError` naming
    where it came from, `source`: the `--model` argument by default, or
    e.g. "<model_dir>/config.json: model_name" for a name read from a file."""
    check_name(name, source)
    if name not in _REGISTRY:
        importlib.import_module(_FAMILY_OF[name])
    return _REGISTRY[name]


def check_name(name, source="--model"):
    """Raises `InputError` (see `get`) unless `name` is a registered model's
    name; imports nothing."""
    if not isinstance(name, str) or name not in _FAMILY_OF and name not in _REGISTRY:
        raise InputError(f"{source} {name!r}: unknown model; known models: {', '.join(names())}")


def names():
    return sorted({*_FAMILY_OF, *_REGISTRY})
