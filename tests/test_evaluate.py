"""The `evaluate.py` command line (the protocol itself:
tests/engine/test_evaluation.py)."""

import json
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest

import evaluate
from models import registry
from tests.helpers import EMBEDDED_DATA, evaluated_metrics, run_config_json, run_timing_imports


@pytest.mark.parametrize("argv, error", [
    (["--model-dir", "{tmp}/nowhere"], "error: --model-dir: {tmp}/nowhere holds no training run (no config.json)"),
    (["--saved-model", "{tmp}"], "error: {tmp}: not a readable SavedModel (no saved_model.pb in that folder)"),
    (["--model-dir", "{tmp}", "--data", "{tmp}/nowhere"], "error: --data {tmp}/nowhere: no such folder"),
], ids=["model-dir", "saved-model", "data"])
def test_a_missing_model_or_folder_is_refused_before_tensorflow_loads(argv, error, tmp_path):
    (tmp_path / "config.json").write_text("{}")  # a run, as far as can be told without reading it
    status, messages, imported = run_timing_imports(["evaluate.py", *[arg.format(tmp=tmp_path) for arg in argv]])
    assert status == 2 and messages == [error.format(tmp=tmp_path)]
    assert "common.errors" in imported and "tensorflow" not in imported


@pytest.mark.parametrize("setting, error", [
    ("model.similarity=dott", "error: model.similarity must be one of cosine, order; got 'dott'"),
    ("model.similarty=dot", "error: --set 'model.similarty=dot': unknown key; valid keys: "),
    ("train.epochs=2", "error: --set ['train.epochs=2']: only model.KEY=VALUE settings apply to a trained model"),
], ids=["choice", "key", "section"])
def test_a_set_mistake_is_refused_before_tensorflow_loads(setting, error, tmp_path):
    (tmp_path / "config.json").write_text(run_config_json(registry.get("gru").experiment("paper")))
    status, messages, imported = run_timing_imports(["evaluate.py", "--model-dir", tmp_path, "--set", setting])
    assert status == 2 and len(messages) == 1 and messages[0].startswith(error)
    assert "common.errors" in imported and "tensorflow" not in imported


@pytest.mark.parametrize("value, message", [("0", "must be at least 1; got 0"), ("x", "expected an integer; got 'x'")])
def test_counts_on_the_command_line_are_checked_by_argparse(value, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        evaluate.main(["--batch-size", value])
    assert exit_.value.code == 2 and f"argument --batch-size: {message}" in capsys.readouterr().err


# A mixed-precision run's test numbers and export are float32's.
@pytest.mark.parametrize(
    "run", ["trained", pytest.param("trained_bf16", marks=pytest.mark.slow),
            pytest.param("trained_rcn", marks=pytest.mark.slow), "trained_w2vv", "trained_mcnn_st", "trained_mcnn_ens",
            "trained_fv", "trained_ensemble"]
)
def test_evaluate_reproduces_training_numbers_from_checkpoint_and_export(run, request, tmp_path):
    trained = request.getfixturevalue(run)
    expected = json.loads((trained / "results.json").read_text())["test"]
    config = json.loads((trained / "config.json").read_text())
    # The precision the run trained in is recorded in its runtime section.
    assert config["runtime"]["mixed_precision"] == ("bf16" if run == "trained_bf16" else "none")
    data = config["data"]["path"]  # a SavedModel does not know it
    for source in (["--model-dir", str(trained)], ["--saved-model", str(trained / "saved_model")]):
        out = tmp_path / f"{source[0].lstrip('-')}.json"  # a record file is only ever replaced by its own command's
        assert evaluate.main([*source, "--data", data, "--json", str(out)]) == 0
        # Its paths name no folder of this machine: outside the repository <dir>/NAME, inside relative to it.
        recorded = {"--model-dir": f"<dir>/{trained.name}", "--saved-model": "<dir>/saved_model"}[source[0]]
        recorded_data = "data/f8k_precomp" if Path(data) == EMBEDDED_DATA else f"<dir>/{Path(data).name}"
        assert json.loads(out.read_text())["command"] == shlex.join(
            ["python", "evaluate.py", source[0], recorded, "--data", recorded_data])
        got = evaluated_metrics(out)  # the record's one report
        for name, value in expected.items():
            assert got[name] == pytest.approx(value, abs=1e-6), (source, name)


@pytest.mark.parametrize("run, kind", [("trained", "fc"), ("trained_fne", "fne")])
def test_image_features_take_train_pys_kinds(run, kind, request, tmp_path):
    """`--image-features` names the kind the run was trained on, as
    `train.py --image-features` does, and gives the run's test numbers."""
    trained = request.getfixturevalue(run)
    out = tmp_path / "metrics.json"
    assert evaluate.main(["--model-dir", str(trained), "--image-features", kind, "--json", str(out)]) == 0
    got = evaluated_metrics(out)
    for name, value in json.loads((trained / "results.json").read_text())["test"].items():
        assert got[name] == pytest.approx(value, abs=1e-6), name


def test_image_features_by_their_old_file_name_still_evaluate_with_a_deprecation_line(trained, caplog, capsys):
    """The spelling evaluate.py took before (the feature file's name) reads
    the same file, with one warning naming the new spelling; a kind the run
    does not read is refused in one line."""
    assert evaluate.main(["--model-dir", str(trained), "--image-features", "ims"]) == 0
    assert "rsum" in capsys.readouterr().out
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        "--image-features ims is the old name of fc: write --image-features fc"]
    assert evaluate.main(["--model-dir", str(trained), "--image-features", "fne"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("test_stages.npy: image features have dimension 3120, the model expects 1280"), err
    assert len(err.splitlines()) == 1


def test_evaluate_rejects_bad_data_with_one_line_errors(trained_mcnn_st, tmp_path, capsys):
    # A run on 1280-wide features whose export holds no image backbone (its features record no provenance):
    # each of the six commands loads the model, which for a SavedModel with a backbone takes seconds.
    trained = trained_mcnn_st
    data = tmp_path / "data"
    data.mkdir()
    for name in ("test_caps.txt", "test_ims.npy"):
        shutil.copy(EMBEDDED_DATA / name, data / name)
    captions = (data / "test_caps.txt").read_text().splitlines()
    (data / "test_caps.txt").write_text("\n".join(["a dog " * 300] + captions[1:]) + "\n")
    cases = [
        ("test_caps.txt: caption has more than 512 tokens", None),
        ("image features have dimension 7, the model expects 1280", lambda: np.save(data / "test_ims.npy", np.ones((1000, 7)))),
        ("4999 captions for 1000 images", lambda: (data / "test_caps.txt").write_text("\n".join(captions[1:]) + "\n")),
    ]
    for message, corrupt in cases:
        if corrupt:
            corrupt()
        for source in (["--model-dir", str(trained)], ["--saved-model", str(trained / "saved_model")]):
            assert evaluate.main([*source, "--data", str(data)]) == 2
            err = capsys.readouterr().err.strip()
            assert message in err and len(err.splitlines()) == 1, err
