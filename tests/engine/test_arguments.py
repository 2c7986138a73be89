"""`engine.arguments`: the arguments that choose a trained model and a
split, shared by evaluate.py and tools/show_retrievals.py (which run them
end to end on trained models: tests/test_evaluate.py, tests/tools/)."""

import argparse

import pytest

from common.errors import InputError
from engine.arguments import add_model_and_split_arguments, load_model_and_split


def parse(argv):
    parser = argparse.ArgumentParser()
    add_model_and_split_arguments(parser)
    return parser.parse_args(argv)


def test_a_model_directory_or_a_saved_model_and_defaults_from_the_model():
    args = parse(["--model-dir", "runs/gru"])
    assert (args.model_dir, args.saved_model, args.data, args.image_features, args.split, args.quiet) == (
        "runs/gru", None, None, None, None, False)
    args = parse(["--saved-model", "s", "--data", "d", "--image-features", "stages", "--split", "dev", "--quiet"])
    assert (args.model_dir, args.saved_model, args.data, args.image_features, args.split, args.quiet) == (
        None, "s", "d", "stages", "dev", True)


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
