"""The trained runs a composite model is built from (an ensemble's members,
a two-stage model's stages): read from their directories, checked against
each other and against the new run, without TensorFlow, so a mistake in
`model.members` is refused before TensorFlow loads. `prepare_ensemble` and
`prepare_rerank` are the `prepare` of the `ensemble` (and `mcnn-ens`) and
`rerank` registrations (`models.registry.ModelSpec`)."""

import dataclasses
from pathlib import Path

import numpy as np

from common.errors import InputError
from common.files import read_text
from common.wording import counted
from data import splits
from data.vocabulary import Vocabulary
from models.ensemble_config import EnsembleConfig
from models.experiments import BEST_DIR, load_run
from models.rerank_config import RerankConfig

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


def load_trained_run(model_dir):
    """The `RunConfig` (config.json) of a trained run another model is
    built from (an ensemble's member, a re-ranker's stage): `InputError`
    naming the file unless the run has its vocabulary and a best
    checkpoint."""
    run = load_run(model_dir)
    Vocabulary.load(Path(model_dir) / "vocab.json")
    if best_checkpoint(model_dir) is None:
        raise InputError(f"{Path(model_dir) / BEST_DIR}: no checkpoint; has this run been validated once?")
    return run


def member_experiments(config):
    """The members' `RunConfig`s, from their config.json files:
    `InputError` (one line, naming the file) for fewer than two members, a
    member listed twice, a directory without a run or without a best
    checkpoint or vocabulary, or a member that is an ensemble itself."""
    if len(config.members) < 2:
        raise InputError(
            "model.members: an ensemble needs at least two run directories (train.py's --model-dir), e.g. "
            f"--set model.members=runs/gru-quick,runs/fv-gmm-hglmm-quick; got {list(config.members)}"
        )
    seen = set()
    experiments = []
    for directory in config.members:
        if Path(directory).resolve() in seen:
            raise InputError(f"model.members: {directory} is listed twice")
        seen.add(Path(directory).resolve())
        run = load_trained_run(directory)
        if issubclass(type(run.experiment.model), EnsembleConfig):
            raise InputError(f"{directory}/config.json: a member may not be an ensemble "
                             f"({run.experiment.model_name!r}); list its members instead")
        experiments.append(run)
    if config.weights and len(config.weights) != len(experiments):
        raise InputError(f"model.weights: {counted(len(config.weights), 'weight')} for {counted(len(experiments), 'member')}")
    if config.weights and not sum(config.weights) > 0:
        raise InputError(f"model.weights: at least one weight must be positive; got {list(config.weights)}")
    return experiments


def feature_kinds(runs):
    """The image feature kinds the member `runs` read ({kind: width}), in
    the order they first appear; a kind read at two widths is an error."""
    kinds = {}
    for run in runs:
        name, dim = run.image_features.kind, run.image_features.width
        if kinds.setdefault(name, dim) != dim:
            raise InputError(f"model.members: two members read image features {name!r} of dimensions "
                             f"{kinds[name]} and {dim}; they were trained on different data")
    return kinds


def prepare_ensemble(config):
    """A new ensemble run's experiment config, checked against its members
    before any data is read for training: the image features it reads are
    those of its members; the members must have been trained with the same
    dev and test splits (the same images and captions in the same order,
    wherever they were read from), and the ensemble's dev split must be
    theirs (its weights are chosen on the split its members were selected
    on, never on data they trained on). Its test split may be any (e.g. the
    members' in another order). Otherwise an `InputError` names the run and
    the first difference."""
    runs = member_experiments(config.model)
    kinds = feature_kinds(runs)
    experiments = [run.experiment for run in runs]
    data = dataclasses.replace(config.data, image_features="+".join(kinds))
    contents = {}

    def read(root, split, kind):
        if (root, split) not in contents:
            loaded = splits.load_split(root, split, kind)
            contents[root, split] = loaded.image_ids, loaded.captions, loaded.caption_image
        return contents[root, split]

    def split_of(experiment, role):
        name = getattr(experiment.data, f"{role}_split")
        return read(experiment.data.path, name, experiment.data.image_features), Path(experiment.data.path) / name

    first = config.model.members[0]
    for role in ("dev", "test"):
        reference, where = split_of(experiments[0], role)
        for directory, experiment in zip(config.model.members[1:], experiments[1:]):
            theirs, their_file = split_of(experiment, role)
            difference = split_difference(reference, theirs)
            if difference:
                raise InputError(f"{directory}/config.json: its {role} split ({their_file}) is not the one of "
                                 f"{first} ({where}): {difference}")
    reference, where = split_of(experiments[0], "dev")
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


def stage_experiments(config):
    """The two stages' `RunConfig`s, from their config.json files:
    `InputError` (one line, naming the file) unless `members` is two
    distinct run directories, each with its vocabulary and best checkpoint,
    neither a two-stage run itself."""
    if len(config.members) != 2:
        raise InputError(
            "model.members: a two-stage model needs two run directories (train.py's --model-dir), the first "
            "stage then the second, e.g. --set model.members=runs/fv-gmm-hglmm-quick,runs/ens-all-quick; "
            f"got {list(config.members)}")
    if Path(config.members[0]).resolve() == Path(config.members[1]).resolve():
        raise InputError(f"model.members: {config.members[0]} is both stages; its own evaluation ranks by it alone")
    experiments = []
    for directory in config.members:
        run = load_trained_run(directory)
        if issubclass(type(run.experiment.model), RerankConfig):
            raise InputError(f"{directory}/config.json: a stage may not be a two-stage run itself; "
                             "name its stages' runs instead")
        experiments.append(run)
    return experiments


def prepare_rerank(config):
    """A new two-stage run's experiment config, checked against its stages
    before any data is read: it reads the image features of both stages
    (side by side, once if they are the same kind); both stages were
    selected on the same dev split (the same images and captions in the
    same order) and the run's dev split is theirs, on which `k` is chosen.
    Its test split may be any. Otherwise an `InputError` names the run and
    the first difference."""
    runs = stage_experiments(config.model)
    kinds = feature_kinds(runs)
    experiments = [run.experiment for run in runs]
    data = dataclasses.replace(config.data, image_features="+".join(kinds))

    def dev_of(data_config):
        loaded = splits.load_split(data_config.path, data_config.dev_split, data_config.image_features.split("+")[0])
        return (loaded.image_ids, loaded.captions, loaded.caption_image), Path(data_config.path) / data_config.dev_split

    reference, where = dev_of(experiments[0].data)
    for directory, data_config in ((config.model.members[1], experiments[1].data), (None, data)):
        theirs, their_file = dev_of(data_config)
        difference = split_difference(reference, theirs)
        if difference and directory:
            raise InputError(f"{directory}/config.json: its dev split ({their_file}) is not the one of the first "
                             f"stage, {config.model.members[0]} ({where}): {difference}")
        if difference:
            raise InputError(f"{their_file}: the run's dev split is not its stages' ({where}), on which k must be "
                             f"chosen: {difference}")
    return dataclasses.replace(config, data=data)
