"""The member runs of a composite model, read and checked without
TensorFlow (`models.members`): on hand-made run directories (a config.json,
a vocabulary and a best checkpoint's files, no weights), against
TensorFlow's own reading of a checkpoint folder and hand-built splits."""

import shutil
import subprocess
import sys
import types

import numpy as np
import pytest
import tensorflow as tf

from common.errors import InputError
from data.image_features import ImageFeatures
from data.vocabulary import Vocabulary
from models import members, registry
from tests.helpers import EMBEDDED_DATA, REPO, count_reads, run_config_json


def fake_run(root, name, model_name="gru", data_path=EMBEDDED_DATA, image_features="fc", image_dim=1280,
             checkpoint=True, overrides=()):
    """A run directory as `train.py` leaves it, as far as a composite model
    reads it: config.json, vocab.json and best/checkpoint naming an index
    file (no weights: they are read only when the model is built)."""
    directory = root / name
    (directory / "best").mkdir(parents=True)
    spec = registry.get(model_name)
    config = spec.experiment("paper", [f"data.path={data_path}", *overrides], image_features=image_features)
    (directory / "config.json").write_text(run_config_json(config, image_dim))
    Vocabulary(["<pad>", "<unk>", "a"]).save(directory / "vocab.json")
    if checkpoint:
        (directory / "best" / "checkpoint").write_text('model_checkpoint_path: "ckpt-12"\n'
                                                       'all_model_checkpoint_paths: "ckpt-12"\n')
        (directory / "best" / "ckpt-12.index").write_bytes(b"")
    return directory


@pytest.mark.parametrize("state", ["written", "no index", "no state file", "no folder"])
def test_the_best_checkpoint_is_the_one_tensorflow_finds(tmp_path, state):
    run = fake_run(tmp_path, "run")
    if state == "no index":
        (run / "best" / "ckpt-12.index").unlink()
    elif state == "no state file":
        (run / "best" / "checkpoint").unlink()
    elif state == "no folder":
        shutil.rmtree(run / "best")
    found = tf.train.latest_checkpoint(str(run / "best"))
    assert members.best_checkpoint(run) == found
    assert (found is None) == (state != "written")


def fake_ensemble(root, *runs):
    """A fake ensemble run of the fake `runs` of `fake_run` reading `ims` and `stages`."""
    return fake_run(root, "ensemble", "ensemble", image_dim=1280 + 3000,
                    overrides=[f"model.members={','.join(map(str, runs))}", "data.image_features=ims+stages"])


def prepared(name, overrides):
    """A new run's experiment config of `name`, completed from its parts as train.py completes it."""
    spec = registry.get(name)
    config = spec.experiment("paper", overrides)
    return spec.prepare(config, spec.parts(config.model))


def test_a_trained_run_is_its_config_vocabulary_checkpoint_and_parts(tmp_path):
    fc, fne = fake_run(tmp_path, "fc"), fake_run(tmp_path, "fne", "poe", image_features="fne", image_dim=3000)
    run = members.load_trained_run(fc)
    assert (run.directory, run.experiment.model_name, run.vocabulary.tokens, run.checkpoint, run.parts) == (
        str(fc), "gru", ["<pad>", "<unk>", "a"], str(fc / "best" / "ckpt-12"), ())
    assert run.image_features == ImageFeatures("fc", 1280)
    # A composite run holds its own runs, read with it: a two-stage model's ensemble stage.
    ensemble = fake_ensemble(tmp_path, fc, fne)
    run = members.load_trained_run(ensemble)
    assert [(part.directory, part.experiment.model_name, part.image_features) for part in run.parts] == [
        (str(fc), "gru", ImageFeatures("fc", 1280)), (str(fne), "poe", ImageFeatures("fne", 3000))]


def test_a_trained_run_needs_its_config_vocabulary_checkpoint_and_image_width(tmp_path):
    assert members.load_trained_run(fake_run(tmp_path, "good")).experiment.model_name == "gru"
    cases = {
        fake_run(tmp_path, "no-checkpoint", checkpoint=False): "best: no checkpoint",
        fake_run(tmp_path, "no-width", image_dim=None): "config.json: image_features: a kind name, a positive width",
        tmp_path / "empty": "config.json: no config.json",
    }
    (tmp_path / "empty").mkdir()
    (tmp_path / "no-vocabulary").mkdir()
    shutil.copy(tmp_path / "good" / "config.json", tmp_path / "no-vocabulary")
    cases[tmp_path / "no-vocabulary"] = "vocab.json: file not found"
    for directory, message in cases.items():
        with pytest.raises(InputError, match=message):
            members.load_trained_run(directory)


def test_split_difference_names_the_first_difference():
    ours = (["a.jpg", "b.jpg"], ["x", "y", "z"], np.array([0, 0, 1]))
    assert members.split_difference(ours, ours) is None
    assert members.split_difference(ours, (["a.jpg"], *ours[1:])) == "2 images against 1"
    assert members.split_difference(ours, (["a.jpg", "c.jpg"], *ours[1:])) == "image 2 is 'b.jpg' against 'c.jpg'"
    assert members.split_difference(ours, (ours[0], ["x", "w", "z"], ours[2])) == "caption 2 is 'y' against 'w'"
    assert members.split_difference(ours, (*ours[:2], np.array([0, 1, 1]))) == "the captions belong to other images"


def test_feature_kinds_are_in_order_of_appearance_and_one_width_each():
    def run(kind, width):
        return types.SimpleNamespace(image_features=ImageFeatures(kind, width))

    assert members.feature_kinds([run("fne", 9), run("fc", 4), run("fne", 9)]) == {"fne": 9, "fc": 4}
    with pytest.raises(InputError, match="'fc' of dimensions 4 and 5"):
        members.feature_kinds([run("fc", 4), run("fc", 5)])


def test_an_ensemble_reads_its_members_features_and_refuses_members_of_other_splits(tmp_path):
    fc, fne = fake_run(tmp_path, "fc"), fake_run(tmp_path, "fne", "poe", image_features="fne", image_dim=3000)
    config = prepared("ensemble", [f"model.members={fc},{fne}", f"data.path={EMBEDDED_DATA}"])
    assert config.data.image_features == "fc+fne"
    # The same images and captions, the captions of another image: the dev splits differ.
    other = tmp_path / "other-data"
    shutil.copytree(EMBEDDED_DATA, other)
    captions = (other / "dev_caps.txt").read_text().splitlines()
    (other / "dev_caps.txt").write_text("\n".join([captions[5], *captions[1:5], captions[0], *captions[6:]]) + "\n")
    moved = fake_run(tmp_path, "moved", data_path=other)
    for given, message in [
        ([fc], "an ensemble needs at least two run directories"),
        ([fc, fc], f"model.members: {fc} is listed twice"),
        ([fc, moved], f"{moved}/config.json: its dev split ({other}/dev) is not the one of {fc}"),
        ([fc, fake_run(tmp_path, "inner", "ensemble")], "may not be an ensemble"),
        ([fc, fake_run(tmp_path, "wide", image_dim=7)], "two members read image features 'fc' of dimensions 1280 "
                                                         "and 7"),
    ]:
        with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
            prepared("ensemble", [f"model.members={','.join(map(str, given))}"])
    # Members of the moved data, an ensemble choosing its weights on the original dev split.
    other_member = fake_run(tmp_path, "moved-too", data_path=other)
    with pytest.raises(InputError, match="the ensemble's dev split is not its members'"):
        prepared("ensemble", [f"model.members={moved},{other_member}", f"data.path={EMBEDDED_DATA}"])


def test_a_two_stage_model_reads_both_stages_features_and_chooses_k_on_their_dev_split(tmp_path):
    fc, fne = fake_run(tmp_path, "fc"), fake_run(tmp_path, "fne", "poe", image_features="fne", image_dim=3000)
    assert prepared("rerank", [f"model.members={fc},{fne}"]).data.image_features == "fc+fne"
    assert prepared("rerank", [f"model.members={fc},{fake_run(tmp_path, 'fc2')}"]).data.image_features == "fc"
    for given, message in [
        ([fc], "a two-stage model needs two run directories"),
        ([fc, fc], "is both stages"),
        ([fc, fake_run(tmp_path, "inner", "rerank")], "a stage may not be a two-stage run itself"),
    ]:
        with pytest.raises(InputError, match=message):
            prepared("rerank", [f"model.members={','.join(map(str, given))}"])


def test_members_are_checked_without_tensorflow(tmp_path):
    fc, fne = fake_run(tmp_path, "fc"), fake_run(tmp_path, "fne", "poe", image_features="fne", image_dim=3000)
    code = (f"import sys\nfrom models import registry\nspec = registry.get('ensemble')\n"
            f"config = spec.experiment('paper', ['model.members={fc},{fne}'])\n"
            "spec.prepare(config, spec.parts(config.model))\n"
            "print(sorted({'tensorflow', 'keras'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_runs_files_are_read_once_however_often_it_is_named(tmp_path, monkeypatch):
    # gru proposes, an ensemble holding it and poe re-ranks: gru is named twice (a stage, a member).
    fc, fne = fake_run(tmp_path, "fc"), fake_run(tmp_path, "fne", "poe", image_features="fne", image_dim=3000)
    ensemble = fake_ensemble(tmp_path, fc, fne)
    reads = count_reads(monkeypatch, [fc, fne, ensemble])
    spec = registry.get("rerank")
    config = spec.experiment("paper", [f"model.members={fc},{ensemble}"])
    stages = spec.parts(config.model)
    # The features of the first stage, then the second's (its own side by side, under one name).
    assert spec.prepare(config, stages).data.image_features == "fc+fc+fne"
    assert reads == {f"{run}/{name}": 1 for run in ("fc", "fne", "ensemble") for name in ("config.json", "vocab.json")}
    # The first stage is the second's record of that run, under the name the two-stage model gives it.
    first, second = stages
    assert first.directory == str(fc) and first.experiment == second.parts[0].experiment
