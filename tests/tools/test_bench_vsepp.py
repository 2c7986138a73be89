import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common import machine
from tests.helpers import cut_splits
from tools import bench_vsepp

REPO = Path(__file__).resolve().parents[2]
TINY = ["--set", "model.word_dim=8", "--set", "model.embed_dim=16", "--steps", "2", "--warmup", "1"]


@pytest.fixture(scope="module")
def short_training_data(tmp_path_factory):
    """The embedded data with a training split of 200 images: the zoo's
    side builds its vocabulary and batches from it."""
    return cut_splits(tmp_path_factory.mktemp("data") / "short_training", {"train": 200})


def test_vsepp_comparison_needs_a_vse_model(tmp_path, capsys):
    assert bench_vsepp.main([str(tmp_path), "--model", "w2vv"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --model w2vv: VSE++ trains a VSE model (a models.vse_config.VSEConfig); w2vv's config is W2VVConfig"
    )


def test_vsepp_comparison_needs_pytorch_and_a_clone_of_vsepp(short_training_data, tmp_path, capsys):
    assert bench_vsepp.main([str(tmp_path), "--model", "gru", *TINY, "--set", f"data.path={short_training_data}"]) == 2
    error = capsys.readouterr().err.strip()
    # Without PyTorch, that; with it, the missing clone.
    assert error in ("error: VSE++ needs PyTorch: pip install torch (a CPU build will do)",
                     f"error: {tmp_path / 'model.py'}: not found (VSEPP_CLONE is a clone of github.com/fartashf/vsepp)")


def test_vsepp_comparison_takes_one_clone(capsys):
    with pytest.raises(SystemExit):
        bench_vsepp.main(["--model", "gru"])
    assert "VSEPP_CLONE" in capsys.readouterr().err


# A stand-in for VSE++'s model.py whose training step does nothing, with a
# PyTorch just big enough for `vsepp_worker` to feed it batches.
FAKE_VSEPP_MODEL = """
class VSE:
    def __init__(self, options):
        self.options = options

    def train_start(self):
        pass

    def criterion(self, image_embeddings, caption_embeddings):
        return 0.0

    def train_emb(self, images, captions, lengths):
        pass
"""
FAKE_TORCH_WITH_TENSORS = """
class Tensor:
    def __init__(self, array):
        self.array = array

    def long(self):
        return self


class cuda:
    @staticmethod
    def is_available():
        return False


from_numpy = Tensor
"""


def _fake_clone(tmp_path, monkeypatch, model_py):
    """A VSE++ clone whose model.py is `model_py`, beside a fake torch on
    the path (the spawned worker gets this sys.path); returns the clone."""
    clone, fake = tmp_path / "vsepp", tmp_path / "fake"
    clone.mkdir()
    (clone / "model.py").write_text(model_py)
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(FAKE_TORCH_WITH_TENSORS)
    monkeypatch.syspath_prepend(str(fake))
    return clone


def test_vsepp_comparison_records_its_report(short_training_data, tmp_path, monkeypatch, capsys):
    clone = _fake_clone(tmp_path, monkeypatch, FAKE_VSEPP_MODEL)
    argv = [str(clone), *TINY, "--set", f"data.path={short_training_data}", "--steps", "1", "--warmup", "0",
            "--rounds", "1"]
    assert bench_vsepp.main([*argv, "--record", str(tmp_path / "vsepp.json")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == "gru" and len(report["rounds_pairs_per_s"]) == 1
    # Each side's instruction set, under the caps of its own libraries.
    assert report["zoo_isa"] == str(machine.instruction_set(machine.TENSORFLOW_ISA_CAPS))
    assert report["vsepp_isa"] == str(machine.instruction_set(machine.PYTORCH_ISA_CAPS))
    record = json.loads((tmp_path / "vsepp.json").read_text())
    assert record["reports"] == [report]
    # The clone, outside the repository, is <dir>/NAME: no folder of this machine.
    assert record["command"] == (f"python -m tools.bench_vsepp '<dir>/{clone.name}' {' '.join(TINY)} "
                                 "--set 'data.path=<dir>/short_training' --steps 1 --warmup 0 --rounds 1")


@pytest.mark.parametrize("model_py, missing", [
    ("class Model:\n    pass\n", "VSE class"),
    (FAKE_VSEPP_MODEL.replace("def train_emb", "def train_embedding"), "VSE.train_emb"),
])
def test_a_clone_without_what_the_comparison_calls_is_named_in_one_line(short_training_data, tmp_path, monkeypatch,
                                                                         capsys, model_py, missing):
    clone = _fake_clone(tmp_path, monkeypatch, model_py)
    argv = [str(clone), *TINY, "--set", f"data.path={short_training_data}", "--steps", "1", "--warmup", "0",
            "--rounds", "1"]
    assert bench_vsepp.main(argv) == 2
    out, err = capsys.readouterr()
    assert [line for line in err.splitlines() if line.startswith("error:")] == [
        f"error: {clone / 'model.py'}: has no {missing} (VSEPP_CLONE is a clone of github.com/fartashf/vsepp)"
    ]
    assert "Traceback" not in err and out == ""


# --- VSE++'s process is supervised (tools.worker.Worker) ---------------------

# A stand-in for PyTorch, just enough for `vsepp_worker` to reach the clone's model.py.
FAKE_TORCH = """
class Tensor:
    pass


class cuda:
    @staticmethod
    def is_available():
        return False
"""


def test_a_clone_whose_model_py_fails_to_import_ends_the_command_with_its_error(short_training_data, tmp_path):
    """VSE++'s process dies importing the clone's model.py: the command ends
    (it used to wait forever for the dead worker) with exit 2 and one line
    naming model.py, its line and the exception."""
    clone, fake = tmp_path / "vsepp", tmp_path / "fake"
    clone.mkdir()
    (clone / "model.py").write_text("import torch\nimport vsepp_dependency_that_is_missing\n")
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(FAKE_TORCH)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake), str(REPO)]), "TF_CPP_MIN_LOG_LEVEL": "3"}
    argv = [sys.executable, "-m", "tools.bench_vsepp", str(clone), *TINY, "--set", f"data.path={short_training_data}",
            "--steps", "1", "--warmup", "0", "--rounds", "1"]
    began = time.monotonic()
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    error_lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert error_lines == [
        f"error: VSE++ of {clone} failed: {clone / 'model.py'}:2: "
        "ModuleNotFoundError: No module named 'vsepp_dependency_that_is_missing'"
    ]
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert time.monotonic() - began < 90  # the zoo's model is built first; a hang would run into the timeout
