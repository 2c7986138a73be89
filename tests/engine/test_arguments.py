"""`engine.arguments`: the arguments that choose a trained model and a
split, shared by evaluate.py and tools/show_retrievals.py (which run them
end to end on trained models: tests/test_evaluate.py, tests/tools/)."""

import argparse
import json

import pytest

from common.errors import InputError
from engine.arguments import add_model_and_split_arguments, load_model_and_split
from tests.helpers import EMBEDDED_DATA


def parse(argv):
    parser = argparse.ArgumentParser()
    add_model_and_split_arguments(parser)
    return parser.parse_args(argv)


def test_a_model_directory_or_a_saved_model_and_defaults_from_the_model():
    args = parse(["--model-dir", "runs/gru"])
    assert (args.model_dir, args.saved_model, args.data, args.image_features, args.split, args.quiet) == (
        "runs/gru", None, None, None, None, False)
    args = parse(["--saved-model", "s", "--data", "d", "--image-features", "fne", "--split", "dev", "--quiet"])
    assert (args.model_dir, args.saved_model, args.data, args.image_features, args.split, args.quiet) == (
        None, "s", "d", "fne", "dev", True)


@pytest.mark.parametrize("argv", [[], ["--model-dir", "a", "--saved-model", "b"]])
def test_exactly_one_model_source(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        parse(argv)
    assert exit_.value.code == 2 and "--model-dir" in capsys.readouterr().err


def test_settings_need_a_model_directory(tmp_path):
    """A SavedModel's settings are fixed: refused before it is read."""
    args = parse(["--saved-model", str(tmp_path / "missing")])
    with pytest.raises(InputError, match="^--set needs --model-dir: a SavedModel's settings are fixed$"):
        load_model_and_split(args, ["model.similarity=dot"])


def provenance_folder(sample_data, folder, provenance):
    """The 8-image sample split in `folder`, with this provenance.json (or none)."""
    import shutil

    shutil.copytree(sample_data, folder)
    if provenance is not None:
        (folder / "provenance.json").write_text(json.dumps(provenance))
    return folder


@pytest.mark.parametrize("source", ["--model-dir", "--saved-model"])
def test_features_made_otherwise_than_the_runs_are_refused_naming_both_files(trained, sample_data, tmp_path, source):
    embedded = json.loads((EMBEDDED_DATA / "provenance.json").read_text())
    other = provenance_folder(sample_data, tmp_path / "other", {**embedded, "weights": "none"})
    model = trained if source == "--model-dir" else trained / "saved_model"
    recorded_in = trained / "config.json" if source == "--model-dir" else trained / "saved_model"
    with pytest.raises(InputError) as error:
        load_model_and_split(parse([source, str(model), "--data", str(other)]))
    message = str(error.value)
    assert message.startswith(f"{other / 'provenance.json'}: these features were made differently")
    assert str(recorded_in) in message and "weights 'none' vs 'imagenet'" in message and "\n" not in message


def test_a_folder_without_provenance_is_evaluated_with_a_notice_after_the_metrics(trained, sample_data, tmp_path,
                                                                                  capsys):
    import evaluate

    bare = provenance_folder(sample_data, tmp_path / "bare", None)
    assert evaluate.main(["--model-dir", str(trained), "--data", str(bare)]) == 0
    captured = capsys.readouterr()
    assert "rsum" in captured.out
    assert captured.err.strip().splitlines()[-1].startswith(f"notice: {bare / 'provenance.json'} does not exist")
    same = provenance_folder(sample_data, tmp_path / "same", json.loads((EMBEDDED_DATA / "provenance.json").read_text()))
    assert evaluate.main(["--model-dir", str(trained), "--data", str(same)]) == 0
    assert "notice" not in capsys.readouterr().err


def test_an_older_run_without_provenance_loads_without_checks(trained, sample_data, tmp_path):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(trained, old, ignore=shutil.ignore_patterns("saved_model", "checkpoints", "logs"))
    config = json.loads((old / "config.json").read_text())
    config["image_features"]["provenance"] = None
    (old / "config.json").write_text(json.dumps(config))
    bare = provenance_folder(sample_data, tmp_path / "bare", None)
    scorer, split = load_model_and_split(parse(["--model-dir", str(old), "--data", str(bare)]))
    assert scorer.image_features.provenance is None and len(split.images) == 8
