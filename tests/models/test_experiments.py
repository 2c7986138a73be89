"""A run's experiment config back from its directory's config.json
(`models.experiments.load_experiment`), without TensorFlow: the file's
absence and an unknown model name named in one line, the `--set`
overrides a trained model takes (its model's settings alone, checked as
any), and the folder of the best checkpoint (`BEST_DIR`)."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

import models
from common.errors import InputError
from models import registry
from models.experiments import BEST_DIR, load_experiment

REPOSITORY = Path(models.__file__).resolve().parents[1]


@pytest.fixture
def run(tmp_path):
    """A run directory as far as `load_experiment` reads it: the config.json
    of a `gru` quick run on 1280-d features."""
    config = dataclasses.replace(registry.get("gru").experiment("quick", ["train.seed=7"]), image_dim=1280)
    (tmp_path / "config.json").write_text(config.to_json())
    return tmp_path


def test_a_directory_without_a_config_json_is_named_with_what_it_should_be(tmp_path):
    with pytest.raises(InputError) as error:
        load_experiment(tmp_path / "no-run")
    assert str(error.value) == (f"{tmp_path / 'no-run' / 'config.json'}: no config.json; is this a model directory "
                                "written by train.py?")


def test_an_unknown_model_name_names_the_file_and_its_key(run):
    (run / "config.json").write_text((run / "config.json").read_text().replace('"model_name": "gru"',
                                                                               '"model_name": "gru-xl"'))
    with pytest.raises(InputError) as error:
        load_experiment(run)
    assert str(error.value).startswith(f"{run / 'config.json'}: model_name 'gru-xl': unknown model; known models: ")


@pytest.mark.parametrize("overrides", [
    ["train.epochs=3"], ["data.test_split=dev"], ["runtime.mixed_precision=bf16"], ["similarity=order"],
    ["model.similarity=order", "train.epochs=3"],
])
def test_overrides_of_anything_but_the_model_are_refused(run, overrides):
    with pytest.raises(InputError) as error:
        load_experiment(run, overrides)
    assert str(error.value) == f"--set {overrides}: only model.KEY=VALUE settings apply to a trained model"


def test_a_model_override_changes_that_setting_alone(run):
    written = load_experiment(run)
    assert (written.model_name, written.preset, written.image_dim, written.train.seed) == ("gru", "quick", 1280, 7)
    assert written.model.similarity == "cosine"
    changed = load_experiment(run, ["model.similarity=order", "model.absolute=true"])
    assert changed == dataclasses.replace(written, model=dataclasses.replace(written.model, similarity="order",
                                                                             absolute=True))


@pytest.mark.parametrize("override, message", [
    ("model.similarity=dot", "model.similarity must be one of cosine, order; got 'dot'"),
    ("model.similarity_name=order", "--set 'model.similarity_name=order': unknown key"),
])
def test_a_model_override_is_checked_as_any_setting(run, override, message):
    with pytest.raises(InputError, match=f"^{message}"):
        load_experiment(run, [override])


def test_a_run_s_config_is_read_without_tensorflow(run):
    # What lets evaluate.py --model-dir refuse a --set mistake, and a composite model its members', before
    # TensorFlow loads (engine/arguments.py, models/members.py).
    code = ("import sys\nfrom models.experiments import load_experiment\n"
            f"print(load_experiment({str(run)!r}, ['model.similarity=order']).model.similarity)\n"
            "print(sorted({'tensorflow', 'keras'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPOSITORY, capture_output=True, text=True, timeout=300,
                          check=True)
    assert done.stdout.split() == ["order", "[]"]


def test_the_best_checkpoint_folder_is_best():
    # Recorded and published run directories hold their best weights in best/ (docs/training.md's layout).
    assert BEST_DIR == "best"
