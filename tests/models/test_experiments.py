"""A run's config.json (`models.experiments.RunConfig`, `load_run`),
without TensorFlow: written versioned, with the image features as a
record of their own, and read back through the same types; files of
version 1 (the facts `image_dim` and `image_provenance` beside the
settings, the feature kinds by their file stems) read as the same types;
the file's absence, an unknown model, a hand-edited value, an unknown
version and a malformed record named in one line; the `--set` overrides a
trained model takes (its model's settings alone, checked as any), and the
folder of the best checkpoint (`BEST_DIR`)."""

import dataclasses
import json
import subprocess
import sys
import typing
from pathlib import Path

import pytest

import models
from common.config import RuntimeConfig
from common.errors import InputError
from data.image_features import ImageFeatures
from models import registry
from models.base_config import ExperimentConfig
from models.experiments import BEST_DIR, RunConfig, load_run

REPOSITORY = Path(models.__file__).resolve().parents[1]
PROVENANCE = {"backbone": "efficientnet-lite0", "weights": "imagenet", "crops": 1}


@pytest.fixture
def written():
    """The `RunConfig` of a `gru` quick run on 1280-d `fc` features."""
    return RunConfig(registry.get("gru").experiment("quick", ["train.seed=7"]), ImageFeatures("fc", 1280, PROVENANCE))


@pytest.fixture
def run(tmp_path, written):
    """A run directory as far as `load_run` reads it: its config.json."""
    (tmp_path / "config.json").write_text(written.to_json())
    return tmp_path


def version_1(experiment, kind="ims", image_dim=1280, provenance=PROVENANCE):
    """A config.json as train.py wrote it before version 2 (hand-built: the
    settings' fields with the run's facts beside them, no version)."""
    raw = dataclasses.asdict(experiment)
    raw["data"]["image_features"] = kind
    return {**raw, "image_dim": image_dim, "image_provenance": provenance}


def test_the_file_is_versioned_and_keeps_the_image_features_apart_from_the_settings(run, written):
    raw = json.loads((run / "config.json").read_text())
    assert raw["version"] == 2
    assert raw["image_features"] == {"kind": "fc", "width": 1280, "provenance": PROVENANCE}
    assert set(raw) == {"version", "model_name", "preset", "model", "train", "data", "runtime", "image_features"}
    assert raw["data"]["image_features"] == "fc" and raw["train"]["seed"] == 7
    assert load_run(run) == written


def test_the_experiment_config_is_typed_without_any():
    hints = typing.get_type_hints(ExperimentConfig)
    assert set(hints) == {"model_name", "preset", "model", "train", "data", "runtime"}
    assert all(isinstance(hint, type) for hint in hints.values()), hints
    assert "image_dim" not in hints and "image_provenance" not in hints


def test_a_version_1_file_reads_as_the_same_types(tmp_path, written):
    (tmp_path / "config.json").write_text(json.dumps(version_1(written.experiment)))
    assert load_run(tmp_path) == written
    # An ensemble of both kinds named them by their file stems.
    (tmp_path / "config.json").write_text(json.dumps(version_1(written.experiment, "ims+stages", 1280 + 2208, None)))
    read = load_run(tmp_path)
    assert read.experiment.data.image_features == "fc+fne"
    assert read.image_features == ImageFeatures("fc+fne", 3488, None)


def test_a_version_1_file_from_before_the_runtime_section_still_loads(tmp_path, written):
    """Runs written before the runtime section kept mixed_precision and
    jit_compile in `train`: they load into `runtime`."""
    legacy = version_1(dataclasses.replace(written.experiment, train=dataclasses.replace(written.experiment.train, epochs=3)))
    del legacy["runtime"]
    legacy["train"].update(mixed_precision="bf16", jit_compile=True)
    (tmp_path / "config.json").write_text(json.dumps(legacy))
    config = load_run(tmp_path).experiment
    assert config.runtime == RuntimeConfig(strategy="auto", mixed_precision="bf16", jit_compile=True)
    assert config.train.epochs == 3 and not hasattr(config.train, "mixed_precision")
    # Without either key: the runtime defaults.
    del legacy["train"]["mixed_precision"], legacy["train"]["jit_compile"]
    (tmp_path / "config.json").write_text(json.dumps(legacy))
    assert load_run(tmp_path).experiment.runtime == RuntimeConfig()
    # A bad legacy value is named as the runtime setting it now is.
    legacy["train"]["mixed_precision"] = "fp8"
    (tmp_path / "config.json").write_text(json.dumps(legacy))
    with pytest.raises(InputError, match=f"^{tmp_path / 'config.json'}: runtime.mixed_precision must be one of"):
        load_run(tmp_path)


def test_a_file_with_a_runtime_section_keeps_train_free_of_runtime_settings(run):
    raw = json.loads((run / "config.json").read_text())
    raw["train"]["mixed_precision"] = "bf16"
    (run / "config.json").write_text(json.dumps(raw))
    with pytest.raises(InputError, match=f"^{run / 'config.json'}: train.mixed_precision: unknown setting"):
        load_run(run)


@pytest.mark.parametrize("edit, message", [
    (lambda raw: raw["train"].update(learning_rate=-0.1), "train.learning_rate must be > 0"),
    (lambda raw: raw["model"].update(embed_dim=0), "model.embed_dim must be >= 1"),
    (lambda raw: raw["model"].update(capsules=3), "model.capsules: unknown setting"),
    (lambda raw: raw["train"].update(epochs="many"), "train.epochs must be of type int"),
    (lambda raw: raw.update(version=3), "config version 3; this zoo reads versions 1 and 2"),
    (lambda raw: raw.pop("image_features"), "image_features must hold kind, width and provenance; got None"),
    (lambda raw: raw["image_features"].update(width=0), "image_features: a kind name, a positive width"),
    (lambda raw: raw["image_features"].update(width=12.5), "image_features: a kind name, a positive width"),
    (lambda raw: raw["image_features"].update(kind="fc+"), "image features 'fc\\+': expected a kind"),
    (lambda raw: raw.pop("preset"), "unreadable model config \\(needs model_name and preset\\)"),
])
def test_a_hand_edited_file_is_checked_naming_it(run, edit, message):
    raw = json.loads((run / "config.json").read_text())
    edit(raw)
    (run / "config.json").write_text(json.dumps(raw))
    with pytest.raises(InputError, match=f"^{run / 'config.json'}: {message}"):
        load_run(run)


def test_a_version_1_file_without_its_image_width_is_no_run(tmp_path, written):
    (tmp_path / "config.json").write_text(json.dumps(version_1(written.experiment, image_dim=None)))
    with pytest.raises(InputError) as error:
        load_run(tmp_path)
    assert str(error.value) == f"{tmp_path / 'config.json'}: no image_dim; is this a run written by train.py?"


def test_a_directory_without_a_config_json_is_named_with_what_it_should_be(tmp_path):
    with pytest.raises(InputError) as error:
        load_run(tmp_path / "no-run")
    assert str(error.value) == (f"{tmp_path / 'no-run' / 'config.json'}: no config.json; is this a model directory "
                                "written by train.py?")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(InputError, match=f"^{tmp_path / 'config.json'}: unreadable model config"):
        load_run(tmp_path)


def test_an_unknown_model_name_names_the_file_and_its_key(run):
    (run / "config.json").write_text((run / "config.json").read_text().replace('"model_name": "gru"',
                                                                               '"model_name": "gru-xl"'))
    with pytest.raises(InputError) as error:
        load_run(run)
    assert str(error.value).startswith(f"{run / 'config.json'}: model_name 'gru-xl': unknown model; known models: ")


@pytest.mark.parametrize("overrides", [
    ["train.epochs=3"], ["data.test_split=dev"], ["runtime.mixed_precision=bf16"], ["similarity=order"],
    ["model.similarity=order", "train.epochs=3"],
])
def test_overrides_of_anything_but_the_model_are_refused(run, overrides):
    with pytest.raises(InputError) as error:
        load_run(run, overrides)
    assert str(error.value) == f"--set {overrides}: only model.KEY=VALUE settings apply to a trained model"


def test_a_model_override_changes_that_setting_alone(run, written):
    assert written.experiment.model.similarity == "cosine"
    changed = load_run(run, ["model.similarity=order", "model.absolute=true"])
    experiment = written.experiment
    assert changed == RunConfig(
        dataclasses.replace(experiment, model=dataclasses.replace(experiment.model, similarity="order", absolute=True)),
        written.image_features)


@pytest.mark.parametrize("override, message", [
    ("model.similarity=dot", "model.similarity must be one of cosine, order; got 'dot'"),
    ("model.similarity_name=order", "--set 'model.similarity_name=order': unknown key"),
])
def test_a_model_override_is_checked_as_any_setting(run, override, message):
    with pytest.raises(InputError, match=f"^{message}"):
        load_run(run, [override])


def test_a_run_s_config_is_read_without_tensorflow(run):
    # What lets evaluate.py --model-dir refuse a --set mistake, and a composite model its members', before
    # TensorFlow loads (engine/arguments.py, models/members.py).
    code = ("import sys\nfrom models.experiments import load_run\n"
            f"print(load_run({str(run)!r}, ['model.similarity=order']).experiment.model.similarity)\n"
            "print(sorted({'tensorflow', 'keras'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPOSITORY, capture_output=True, text=True, timeout=300,
                          check=True)
    assert done.stdout.split() == ["order", "[]"]


def test_the_best_checkpoint_folder_is_best():
    # Recorded and published run directories hold their best weights in best/ (docs/training.md's layout).
    assert BEST_DIR == "best"


@pytest.mark.parametrize("name", registry.names())
def test_every_models_experiment_round_trips_through_config_json(name, tmp_path):
    spec = registry.get(name)
    for preset in ("paper", *spec.presets):
        config = spec.experiment(preset, ["train.seed=7", "runtime.mixed_precision=bf16", "runtime.strategy=default"])
        (tmp_path / "config.json").write_text(RunConfig(config, ImageFeatures("fc", 1280)).to_json())
        restored = load_run(tmp_path)
        assert restored == RunConfig(config, ImageFeatures("fc", 1280)), (name, preset)
        assert type(restored.experiment.model) is spec.config_class
        assert (restored.experiment.train.seed, restored.experiment.runtime.mixed_precision,
                restored.experiment.runtime.strategy) == (7, "bf16", "default")


def test_a_hand_written_config_json_fills_the_rest_from_the_class_defaults(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "version": 2, "model_name": "gru", "preset": "quick",
        "image_features": {"kind": "fc", "width": 12, "provenance": None},
        "model": {"embed_dim": 64}, "train": {"epochs": 3}, "runtime": {"jit_compile": True},
    }))
    run = load_run(tmp_path)
    config, spec = run.experiment, registry.get("gru")
    assert (config.model_name, config.preset, run.image_features.width) == ("gru", "quick", 12)
    assert config.model == dataclasses.replace(spec.config_class(), embed_dim=64)
    assert config.train == dataclasses.replace(type(spec.train)(), epochs=3)
    assert config.data == type(spec.data)()
    assert (config.runtime.strategy, config.runtime.mixed_precision, config.runtime.jit_compile) == (
        "auto", "none", True)


@pytest.mark.parametrize("name", ["nosuch", 7, ["gru"]])
def test_an_unknown_model_name_in_config_json_names_the_file_and_key_not_an_argument(tmp_path, name):
    """The user gave no --model: the error names config.json and its model_name key."""
    (tmp_path / "config.json").write_text(json.dumps({"model_name": name, "preset": "paper"}))
    with pytest.raises(InputError) as error:
        load_run(tmp_path)
    assert str(error.value) == (
        f"{tmp_path / 'config.json'}: model_name {name!r}: unknown model; known models: {', '.join(registry.names())}"
    )
