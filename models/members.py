"""The trained runs a composite model is made of (an ensemble's members, a
two-stage model's stages), read once from their directories into
`TrainedRun` records and checked against each other and against the new
run, without TensorFlow, so a mistake in `model.members` is refused before
TensorFlow loads. The records are what the composite model is built from
(`models.composite`): a run's files are read once a process.

`ensemble_members` and `rerank_stages` are the `parts` of the `ensemble`
(and, through m-CNN's own check, `mcnn-ens`) and `rerank` registrations,
`prepare_ensemble` and `prepare_rerank` their `prepare`
(`models.registry.ModelSpec`); `composite_spec` is what those registrations
share."""

import dataclasses
from pathlib import Path

import numpy as np

from common.config import TrainConfig
from common.errors import InputError
from common.files import read_text
from common.wording import counted
from data import splits
from data.image_features import ImageFeatures
from data.vocabulary import PAD, UNK, Vocabulary
from models import registry
from models.base_config import ExperimentConfig
from models.experiments import BEST_DIR, load_run


@dataclasses.dataclass(frozen=True)
class TrainedRun:
    """A trained run as a composite model is built from it: its files, read
    once and checked.

    Attributes:
      directory: the run directory (train.py's --model-dir), as named in
        `model.members`.
      experiment: its `ExperimentConfig` (config.json's settings).
      image_features: the `ImageFeatures` it trained on (config.json's).
      vocabulary: its `Vocabulary` (vocab.json).
      checkpoint: the path of its best checkpoint (`best_checkpoint`).
      parts: the runs it is made of itself, read with it when it is a
        composite model (an ensemble as a two-stage model's second stage),
        else empty.
    """

    directory: str
    experiment: ExperimentConfig
    image_features: ImageFeatures
    vocabulary: Vocabulary
    checkpoint: str
    parts: tuple["TrainedRun", ...] = ()


def best_checkpoint(model_dir):
    """The path of the newest best checkpoint of a run directory, or None:
    what `tf.train.latest_checkpoint(<model_dir>/best)` finds (the
    checkpoint named in `best/checkpoint`, whose index file exists), read
    without TensorFlow."""
    state = Path(model_dir) / BEST_DIR / "checkpoint"
    if not state.is_file():
        return None
    for line in read_text(state).splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model_checkpoint_path":
            path = Path(model_dir) / BEST_DIR / value.strip().strip('"')
            return str(path) if Path(f"{path}.index").is_file() else None
    return None


def load_trained_run(model_dir, check=None):
    """The `TrainedRun` of a run another model is built from (an
    ensemble's member, a re-ranker's stage), with the runs it is made of
    when it is a composite model itself (its registration's `parts`):
    `InputError` naming the file unless the run has its vocabulary, a best
    checkpoint (its image features are checked as config.json is read). `check(model_dir, experiment)`, when
    given, may refuse the run by its experiment config (an `InputError`)
    before the runs it is made of are read."""
    run = load_run(model_dir)
    experiment = run.experiment
    if check:
        check(model_dir, experiment)
    vocabulary = Vocabulary.load(Path(model_dir) / "vocab.json")
    checkpoint = best_checkpoint(model_dir)
    if checkpoint is None:
        raise InputError(f"{Path(model_dir) / BEST_DIR}: no checkpoint; has this run been validated once?")
    spec = registry.get(experiment.model_name)
    parts = spec.parts(experiment.model) if spec.parts else ()
    return TrainedRun(str(model_dir), experiment, run.image_features, vocabulary, checkpoint, parts)


def ensemble_members(config, check=None):
    """The member runs of an ensemble's model config, read and checked:
    `InputError` (one line, naming the file) for fewer than two members, a
    member listed twice, a directory without a run or without a best
    checkpoint or vocabulary, a member that is an ensemble itself (or that
    `check(directory, experiment)` refuses, first), members reading one
    kind of features at two widths, or weights that are not one per member
    with one positive."""
    if len(config.members) < 2:
        raise InputError(
            "model.members: an ensemble needs at least two run directories (train.py's --model-dir), e.g. "
            f"--set model.members=runs/gru-quick,runs/fv-gmm-hglmm-quick; got {list(config.members)}"
        )

    def not_an_ensemble(directory, experiment):
        if check:
            check(directory, experiment)
        # `type(config)`: the ensemble's config class (`ensemble`'s and `mcnn-ens`').
        if isinstance(experiment.model, type(config)):
            raise InputError(f"{directory}/config.json: a member may not be an ensemble "
                             f"({experiment.model_name!r}); list its members instead")

    seen = set()
    runs = []
    for directory in config.members:
        if Path(directory).resolve() in seen:
            raise InputError(f"model.members: {directory} is listed twice")
        seen.add(Path(directory).resolve())
        runs.append(load_trained_run(directory, not_an_ensemble))
    if config.weights and len(config.weights) != len(runs):
        raise InputError(f"model.weights: {counted(len(config.weights), 'weight')} for {counted(len(runs), 'member')}")
    if config.weights and not sum(config.weights) > 0:
        raise InputError(f"model.weights: at least one weight must be positive; got {list(config.weights)}")
    feature_kinds(runs)
    return tuple(runs)


def rerank_stages(config):
    """The two stages' runs of a two-stage model's config, read and
    checked: `InputError` (one line, naming the file) unless `members` is
    two distinct run directories, each with its vocabulary and best
    checkpoint, neither a two-stage run itself, reading one kind of
    features at one width. The second stage is read first: a first stage
    that is one of its parts is that part's record."""
    if len(config.members) != 2:
        raise InputError(
            "model.members: a two-stage model needs two run directories (train.py's --model-dir), the first "
            "stage then the second, e.g. --set model.members=runs/fv-gmm-hglmm-quick,runs/ens-all-quick; "
            f"got {list(config.members)}")
    if Path(config.members[0]).resolve() == Path(config.members[1]).resolve():
        raise InputError(f"model.members: {config.members[0]} is both stages; its own evaluation ranks by it alone")

    def not_two_stage(directory, experiment):
        # `type(config)`: the two-stage model's config class.
        if isinstance(experiment.model, type(config)):
            raise InputError(f"{directory}/config.json: a stage may not be a two-stage run itself; "
                             "name its stages' runs instead")

    first, second = config.members
    second_run = load_trained_run(second, not_two_stage)
    # A first stage the second holds (an ensemble's member) was read with it: its record, not a second read.
    held = {Path(part.directory).resolve(): part for part in second_run.parts}.get(Path(first).resolve())
    if held is not None:
        not_two_stage(first, held.experiment)
        runs = (dataclasses.replace(held, directory=first), second_run)
    else:
        runs = (load_trained_run(first, not_two_stage), second_run)
    feature_kinds(runs)
    return runs


def feature_kinds(runs):
    """The image feature kinds `runs` read ({name: dimension}), in the
    order they first appear; a kind read at two dimensions is an error."""
    kinds = {}
    for run in runs:
        kind, width = run.image_features.kind, run.image_features.width
        if kinds.setdefault(kind, width) != width:
            raise InputError(f"model.members: two members read image features {kind!r} of dimensions "
                             f"{kinds[kind]} and {width}; they were trained on different data")
    return kinds


def prepare_ensemble(config, runs):
    """A new ensemble run's experiment config, checked against its member
    `runs` before any data is read for training: the image features it
    reads are those of its members; the members must have been trained with
    the same dev and test splits (the same images and captions in the same
    order, wherever they were read from), and the ensemble's dev split must
    be theirs (its weights are chosen on the split its members were
    selected on, never on data they trained on). Its test split may be any
    (e.g. the members' in another order). Otherwise an `InputError` names
    the run and the first difference."""
    kinds = feature_kinds(runs)
    data = dataclasses.replace(config.data, image_features="+".join(kinds))
    contents = {}

    def read(root, split, kind):
        if (root, split) not in contents:
            loaded = splits.load_split(root, split, kind)
            contents[root, split] = loaded.image_ids, loaded.captions, loaded.caption_image
        return contents[root, split]

    def split_of(run, role):
        name = getattr(run.experiment.data, f"{role}_split")
        return read(run.experiment.data.path, name, run.image_features.kind), Path(run.experiment.data.path) / name

    first = runs[0].directory
    for role in ("dev", "test"):
        reference, where = split_of(runs[0], role)
        for run in runs[1:]:
            theirs, their_file = split_of(run, role)
            difference = split_difference(reference, theirs)
            if difference:
                raise InputError(f"{run.directory}/config.json: its {role} split ({their_file}) is not the one of "
                                 f"{first} ({where}): {difference}")
    reference, where = split_of(runs[0], "dev")
    difference = split_difference(read(data.path, data.dev_split, next(iter(kinds))), reference)
    if difference:
        raise InputError(f"{Path(data.path) / data.dev_split}: the ensemble's dev split is not its members' ({where}), "
                         f"on which its weights must be chosen: {difference}")
    return dataclasses.replace(config, data=data)


def split_difference(ours, theirs):
    """The first difference between two splits' contents, in words, or None."""
    for what, a, b in zip(("image", "caption"), ours[:2], theirs[:2]):
        if len(a) != len(b):
            return f"{len(a)} {what}s against {len(b)}"
        for index, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return f"{what} {index + 1} is {x!r} against {y!r}"
    if not np.array_equal(ours[2], theirs[2]):
        return "the captions belong to other images"
    return None


def prepare_rerank(config, runs):
    """A new two-stage run's experiment config, checked against its stages'
    `runs` before any data is read: it reads the image features of both
    stages (side by side, once if they are the same kind); both stages were
    selected on the same dev split (the same images and captions in the
    same order) and the run's dev split is theirs, on which `k` is chosen.
    Its test split may be any. Otherwise an `InputError` names the run and
    the first difference."""
    data = dataclasses.replace(config.data, image_features="+".join(feature_kinds(runs)))

    def dev_of(data_config):
        loaded = splits.load_split(data_config.path, data_config.dev_split, data_config.image_features.split("+")[0])
        return (loaded.image_ids, loaded.captions, loaded.caption_image), Path(data_config.path) / data_config.dev_split

    first, second = runs
    reference, where = dev_of(first.experiment.data)
    for directory, data_config in ((second.directory, second.experiment.data), (None, data)):
        theirs, their_file = dev_of(data_config)
        difference = split_difference(reference, theirs)
        if difference and directory:
            raise InputError(f"{directory}/config.json: its dev split ({their_file}) is not the one of the first "
                             f"stage, {first.directory} ({where}): {difference}")
        if difference:
            raise InputError(f"{their_file}: the run's dev split is not its stages' ({where}), on which k must be "
                             f"chosen: {difference}")
    return dataclasses.replace(config, data=data)


def no_vocabulary(config, train_captions, word_vectors=None):
    """A composite model has no vocabulary of its own (each of its runs
    tokenises with its own): <pad> and <unk> only."""
    return Vocabulary([PAD, UNK])


def composite_spec(name, config_class, build, parts, prepare, presets=None):
    """The registration (`models.registry.ModelSpec`) of a model made of
    trained runs: nothing of its own is trained (the trainer fits and
    validates it once), it has no vocabulary of its own, and its `quick`
    preset is its `paper` one unless `presets` say otherwise (its cost is
    its runs')."""
    return registry.ModelSpec(name=name, config_class=config_class, build=build, train=TrainConfig(),
                              vocabulary=no_vocabulary, parts=parts, prepare=prepare,
                              presets=presets or {"quick": {}})
