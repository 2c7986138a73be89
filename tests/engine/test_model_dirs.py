"""`engine.model_dirs`: where a run goes, and which folders can take one."""

import json
from pathlib import Path

import pytest

from common.errors import InputError
from engine import model_dirs
from models import registry
from tests.helpers import run_config_json


def _contents(folder):
    return {path.relative_to(folder).as_posix(): path.read_bytes() if path.is_file() else None
            for path in sorted(folder.rglob("*"))}


def _run_of(folder, config):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(run_config_json(config))


def test_the_default_directory_names_the_model_and_the_preset():
    assert model_dirs.default("gru", "paper") == Path("runs/gru-paper")
    assert model_dirs.default("rcn-0", "quick") == Path("runs/rcn-0-quick")


def test_a_free_directory_is_the_given_one_when_new_or_empty_else_the_next_number(tmp_path):
    assert model_dirs.free(tmp_path / "run") == tmp_path / "run"
    (tmp_path / "run").mkdir()
    assert model_dirs.free(tmp_path / "run") == tmp_path / "run"
    (tmp_path / "run" / "config.json").write_text("{}")
    (tmp_path / "run-2").mkdir()
    (tmp_path / "run-2" / "photo.jpg").write_bytes(b"\xff\xd8")
    assert model_dirs.free(tmp_path / "run") == tmp_path / "run-3"


def test_a_new_run_goes_into_a_new_or_empty_folder(tmp_path):
    config = registry.get("gru").experiment("quick")
    model_dirs.check_new(tmp_path / "new", config)
    (tmp_path / "empty").mkdir()
    model_dirs.check_new(tmp_path / "empty", config)


def test_a_folder_of_anything_else_is_refused_and_left_as_it_is(tmp_path):
    photos = tmp_path / "photos"
    (photos / "2024").mkdir(parents=True)
    (photos / "beach.jpg").write_bytes(b"\xff\xd8 a beach")
    (photos / "2024" / "dog.png").write_bytes(b"\x89PNG a dog")
    before = _contents(photos)
    with pytest.raises(InputError) as error:
        model_dirs.check_new(photos, registry.get("gru").experiment("quick"))
    assert str(error.value) == (f"--model-dir {photos}: exists and is not a training run (a folder without "
                                "config.json); choose a new name")
    assert _contents(photos) == before
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(InputError, match="exists and is not a training run \\(a file\\)"):
        model_dirs.check_new(tmp_path / "notes.txt", registry.get("gru").experiment("quick"))


def test_a_run_of_the_same_settings_is_refused_with_the_resume_command_and_a_free_directory(tmp_path):
    run = tmp_path / "gru-quick"
    _run_of(run, registry.get("gru").experiment("quick"))
    with pytest.raises(InputError) as error:
        model_dirs.check_new(run, registry.get("gru").experiment("quick"))
    assert str(error.value) == (f"--model-dir {run} already holds a training run of these settings; continue it "
                                f"with `python train.py --model-dir {run} --resume`, or start another with "
                                f"--model-dir {tmp_path / 'gru-quick-2'}")


@pytest.mark.parametrize("recorded, requested, described", [
    (("gru", "paper", []), ("gru", "quick", []), "gru, preset paper"),
    (("rcn", "quick", []), ("gru", "quick", []), "rcn, preset quick"),
    (("gru", "quick", ["train.epochs=2"]), ("gru", "quick", []), "gru, preset quick, other --set values"),
])
def test_a_run_of_other_settings_is_refused_naming_them_and_a_free_directory(tmp_path, recorded, requested,
                                                                            described):
    # The preset trap: `--resume` would continue the recorded settings, not the requested ones.
    run = tmp_path / "run"
    name, preset, overrides = recorded
    _run_of(run, registry.get(name).experiment(preset, overrides))
    (tmp_path / "run-2").mkdir()
    (tmp_path / "run-2" / "config.json").write_text("{}")
    name, preset, overrides = requested
    with pytest.raises(InputError) as error:
        model_dirs.check_new(run, registry.get(name).experiment(preset, overrides))
    assert str(error.value) == (f"--model-dir {run} already holds a training run of other settings ({described}), "
                                f"which --resume would continue; start this one with --model-dir {tmp_path / 'run-3'}")


def test_a_run_to_continue_must_be_there(tmp_path):
    with pytest.raises(InputError) as error:
        model_dirs.check_run(tmp_path / "nowhere", "--resume")
    assert str(error.value) == f"--resume: {tmp_path / 'nowhere'} holds no training run (no config.json)"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text(json.dumps({"model_name": "gru"}))
    model_dirs.check_run(tmp_path / "run", "--resume")
