"""The settings of an experiment's sections and how they are checked:
`setting` (a field and the values it may take), the `train` and `runtime`
sections (`TrainConfig`, `RuntimeConfig`) and `--set` overrides
(`apply_overrides`) on any config with the four `SECTIONS`.

The experiment itself, a registered model name plus its four sections
(`model`, `train`, `data`, `runtime`), is `models.experiments.ExperimentConfig`,
which also reads and writes it as a run's config.json. Overrides address
fields as `section.field=value` (e.g. `train.epochs=2`, `model.embed_dim=512`).
"""

import dataclasses
import json
import typing

from common.errors import InputError
from common.metrics import SELECTION_METRICS

SECTIONS = ("model", "train", "data", "runtime")
STRATEGIES = ("auto", "default", "mirrored", "multiworker")
MIXED_PRECISIONS = ("none", "bf16", "fp16")


def setting(default, *, minimum=None, above=None, maximum=None, below=None, choices=None):
    """A config field and the values it may take.

    Numbers (and each number of a tuple) must be >= `minimum`, > `above`,
    <= `maximum` and < `below`; strings (and each string of a tuple) one of
    `choices`. Every config is built through `apply_overrides` or
    `models.experiments.RunConfig.from_json`, which check each field's type and these bounds, so a
    bad value from `--set`, a preset or a hand-edited config.json stops the
    command before any work, naming the field.
    """
    bounds = {"minimum": minimum, "above": above, "maximum": maximum, "below": below}
    valid = {name: value for name, value in bounds.items() if value is not None}
    if choices is not None:
        valid["choices"] = tuple(choices)
    return dataclasses.field(default=default, metadata={"valid": valid})


def valid_values(cls, name):
    """The bounds and choices of field `name` of config class `cls`, from
    the nearest class that declares them (a subclass may change a default
    without repeating them)."""
    for base in cls.__mro__:
        field = getattr(base, "__dataclass_fields__", {}).get(name)
        if field is not None and "valid" in field.metadata:
            return field.metadata["valid"]
    return {}


def check_value(name, value, valid):
    """Raises `InputError` unless `value` (each element of a tuple) is
    within `valid` (a `setting`'s bounds and choices); None always passes
    (the type check decides whether a field may be null)."""
    for item in value if isinstance(value, tuple) else (value,):
        if item is None:
            continue
        if "choices" in valid and item not in valid["choices"]:
            raise InputError(f"{name} must be one of {', '.join(map(str, valid['choices']))}; got {item!r}")
        for bound, holds, relation in (
            ("minimum", lambda x, b: x >= b, ">="),
            ("above", lambda x, b: x > b, ">"),
            ("maximum", lambda x, b: x <= b, "<="),
            ("below", lambda x, b: x < b, "<"),
        ):
            if bound in valid and not holds(item, valid[bound]):
                raise InputError(f"{name} must be {relation} {valid[bound]:g}; got {item!r}")


@dataclasses.dataclass
class TrainConfig:
    """How a model is trained; each model's paper preset sets its own values.

    Attributes:
      optimizer: "adam", "rmsprop" or "sgd".
      optimizer_epsilon: the epsilon of Adam or RMSprop (None = Keras'
        default). Keras 3's RMSprop adds it inside the square root
        (lr g / sqrt(v + eps)), Keras 2's outside (lr g / (sqrt(v) + eps)):
        eps**2 here emulates a Keras-2 eps (exact where v = 0).
      learning_rate: initial learning rate.
      batch_size: global batch size (split over the replicas).
      epochs: maximum number of epochs (of each phase, for a model trained
        in phases).
      lr_decay_epochs: step decay; the learning rate is multiplied by
        `lr_decay_factor` at the start of each listed epoch (0-based).
      lr_decay_factor: factor of the step decay and of reduce-on-plateau.
      plateau_patience: reduce-on-plateau; after this many validations without
        a new best `selection_metric` the learning rate is multiplied by
        `lr_decay_factor` (0 = off).
      grad_clip_norm: clip gradients to this global norm (None = off).
      validate_every: also validate on dev every this many steps (0 = only at
        the end of each epoch). A checkpoint is written at every validation.
      early_stopping_patience: stop after this many validations without a new
        best `selection_metric` (0 = off; in the last training phase).
      selection_metric: the dev metric that picks the best checkpoint and
        drives reduce-on-plateau, early stopping and phase changes: "rsum"
        or any metric where higher is better (`common.metrics.SELECTION_METRICS`,
        e.g. "i2t_map", Word2VisualVec's).
      phase_patience: for a model trained in phases (a curriculum, e.g.
        Vilalta et al.'s PH: the sum of hinges, then the max), a phase ends
        after this many validations without a new best `selection_metric`, or after
        `epochs` epochs; the next phase starts from the best weights so far
        with a fresh optimizer state.
      phase_learning_rates: the learning rate of each phase after the first
        (empty = `learning_rate` for all).
      epochs_in_all: for a model trained in phases, the epochs of all its
        phases together at most (None: `epochs` for each phase).
      sampling: "all_captions" (every caption once per epoch) or
        "one_caption_per_image" (each image once, with one random caption).
      bucket_by_length: group captions of similar length into batches.
      seed: seeds initialisation and the data order.
      max_train_images: train on the first N training images only (smoke
        tests; None = all).
      validate_max_images: validate on the first N dev images and their
        captions only (None = all): for pairwise models, whose dev
        evaluation scores every pair; the final test is always complete.
      log_every: write the training loss to TensorBoard every this many steps.
    """

    optimizer: str = setting("adam", choices=("adam", "rmsprop", "sgd"))
    optimizer_epsilon: float | None = setting(None, above=0)
    learning_rate: float = setting(2e-4, above=0)
    batch_size: int = setting(128, minimum=2)  # negatives come from the batch
    epochs: int = setting(30, minimum=1)
    lr_decay_epochs: tuple[int, ...] = setting((), minimum=0)
    lr_decay_factor: float = setting(0.1, above=0, maximum=1)
    plateau_patience: int = setting(0, minimum=0)
    grad_clip_norm: float | None = setting(2.0, above=0)
    validate_every: int = setting(0, minimum=0)
    early_stopping_patience: int = setting(0, minimum=0)
    selection_metric: str = setting("rsum", choices=SELECTION_METRICS)
    phase_patience: int = setting(0, minimum=0)
    phase_learning_rates: tuple[float, ...] = setting((), above=0)
    epochs_in_all: int | None = setting(None, minimum=1)
    sampling: str = setting("all_captions", choices=("all_captions", "one_caption_per_image"))
    bucket_by_length: bool = False
    seed: int = setting(0, minimum=0)
    max_train_images: int | None = setting(None, minimum=1)
    validate_max_images: int | None = setting(None, minimum=1)
    log_every: int = setting(20, minimum=1)

    def __post_init__(self):
        if self.optimizer_epsilon is not None and self.optimizer == "sgd":
            raise InputError("train.optimizer_epsilon: SGD has no epsilon")


@dataclasses.dataclass
class RuntimeConfig:
    """How a run uses the machine (TF Model Garden's `RuntimeConfig`): none
    of it changes what is trained, only where and in which precision.

    Attributes:
      strategy: the tf.distribute strategy, "auto" (mirrored over all GPUs
        when more than one is visible, else the default strategy),
        "default", "mirrored" or "multiworker" (the cluster from TF_CONFIG).
      mixed_precision: "none" (float32), "bf16" or "fp16": the model is
        built under Keras' "mixed_bfloat16" / "mixed_float16" policy
        (float32 weights, low-precision compute; the similarity, losses
        and normalisations stay float32); fp16 adds Keras' dynamic loss
        scaling. Validation runs in the training precision; the test
        evaluation and the export are float32.
      jit_compile: compile the training step with XLA.
    """

    strategy: str = setting("auto", choices=STRATEGIES)
    mixed_precision: str = setting("none", choices=MIXED_PRECISIONS)
    jit_compile: bool = False


def apply_overrides(config, overrides):
    """Returns a copy of `config` with `section.field=value` strings applied.

    Values are parsed as JSON when they parse (numbers, true/false, null,
    lists), else taken as strings, then checked against the field's type.
    """
    sections = {name: dataclasses.asdict(getattr(config, name)) for name in SECTIONS}
    for item in overrides:
        section, field, raw = check_override(item)
        if field not in sections[section]:
            valid = ", ".join(
                f"{s}.{f}" for s, fields in sections.items() for f in fields
            )
            raise InputError(f"--set {item!r}: unknown key; valid keys: {valid}")
        sections[section][field] = _parse_value(raw.strip())
    return rebuild(config, sections)


def check_override(item):
    """The section, key and value text of a `SECTION.KEY=VALUE` override;
    `InputError` unless it has that form with one of `SECTIONS` (whether
    the section has the key is for `apply_overrides`: a model's keys are
    its family's)."""
    key, sep, raw = item.partition("=")
    section, dot, field = key.strip().partition(".")
    if not sep or not dot or not field or section not in SECTIONS:
        raise InputError(f"--set {item!r}: unknown key; expected SECTION.KEY=VALUE with SECTION one of "
                         f"{', '.join(SECTIONS)}")
    return section, field, raw


def _parse_value(raw):
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def rebuild(config, sections):
    """A copy of `config` with each section of `sections` ({section: {field:
    value}}) built from its values, each checked against its field's type
    and bounds (`InputError` naming the field)."""
    built = {}
    for name, values in sections.items():
        cls = type(getattr(config, name))
        hints = typing.get_type_hints(cls)
        if not isinstance(values, dict):
            raise InputError(f"{name}: must be a mapping of settings; got {values!r}")
        checked = {}
        for field, value in values.items():
            if field not in hints:
                raise InputError(f"{name}.{field}: unknown setting; valid: {', '.join(hints)}")
            checked[field] = _coerce(f"{name}.{field}", value, hints[field])
            check_value(f"{name}.{field}", checked[field], valid_values(cls, field))
        try:
            built[name] = cls(**checked)
        except (TypeError, ValueError) as error:
            raise InputError(f"{name} config: {error}") from None
    return dataclasses.replace(config, **built)


def _coerce(name, value, hint):
    """Checks `value` against a simple type hint, converting where lossless."""
    args = typing.get_args(hint)
    if value is None:
        if type(None) in args:
            return None
        raise InputError(f"{name} cannot be null")
    if args and type(None) in args:
        hint = next(a for a in args if a is not type(None))
    origin = typing.get_origin(hint)
    if origin is tuple:
        if isinstance(value, str):
            value = value.split(",")  # --set model.members=DIR1,DIR2
        elif not isinstance(value, (list, tuple)):
            value = [value]
        return tuple(_coerce(name, v, typing.get_args(hint)[0]) for v in value)
    if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if hint is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise InputError(f"{name} must be of type {hint.__name__}; got {value!r}")
    return value
