"""End-to-end runs of train.py's main on a tiny subset of the embedded data."""

import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import train
from common.errors import InputError
from models import registry
from tests.conftest import TINY
from tests.helpers import EMBEDDED_DATA, REPO, light_copy, run_config_json, run_timing_imports


def test_training_writes_config_vocab_checkpoints_logs_results_and_export(trained):
    for name in ("config.json", "vocab.json", "results.json", "checkpoints/checkpoint", "best/checkpoint",
                 "saved_model/saved_model.pb"):
        assert (trained / name).exists(), name
    config = json.loads((trained / "config.json").read_text())
    assert config["model_name"] == "gru" and config["train"]["epochs"] == 2 and config["image_features"]["width"] == 1280
    # How the run used the machine, in its own section: without --strategy the config's "auto", recorded as
    # what it stood for here (mirrored over several GPUs, else the default strategy).
    import tensorflow as tf

    used = "mirrored" if len(tf.config.list_logical_devices("GPU")) > 1 else "default"
    assert config["runtime"] == {"strategy": used, "mixed_precision": "none", "jit_compile": False}
    assert not {"strategy", "mixed_precision", "jit_compile"} & set(config["train"])
    results = json.loads((trained / "results.json").read_text())
    # 50 tiny steps learn something: chance is rsum 3.3, t2i medr 500.
    assert results["test"]["rsum"] > 6 and results["test"]["t2i_medr"] < 400
    # For `python -m report`: a gradient-trained model fits nothing.
    assert results["wall_seconds"] > 1 and results["peak_memory_bytes"] > 100e6 and "fit" not in results
    # One process trained it, for the two epochs of TINY.
    assert results["pieces"] == 1 and results["epochs"] == 2
    # How long it took, on what: CPU time is at least a share of the wall time, on the cores this process may use.
    import os

    assert results["cores"] == len(os.sched_getaffinity(0)) and len(results["load_average"]) == 2
    # And which machine: this CPU's model name (the first of /proc/cpuinfo) and its best vector extension.
    cpuinfo = Path("/proc/cpuinfo").read_text()
    assert results["cpu"] == next(line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                                  if line.startswith("model name"))
    assert results["isa"] == ("avx512" if " avx512f" in cpuinfo else "avx2" if " avx2" in cpuinfo else results["isa"])
    assert 0.2 * results["wall_seconds"] < results["cpu_seconds"] < results["cores"] * results["wall_seconds"] + 30
    # Its paths name no folder of this machine: the run, outside the repository, is <dir>/NAME; the
    # checkpoint is relative to the run, and the metric that chose it is recorded.
    assert results["command"].startswith("python train.py --model gru ")
    assert f"--model-dir '<dir>/{trained.name}'" in results["command"] and str(trained) not in results["command"]
    assert results["checkpoint"].startswith("best/ckpt-") and (trained / f"{results['checkpoint']}.index").is_file()
    assert results["selection_metric"] == "rsum"
    assert list((trained / "logs" / "train").iterdir()) and list((trained / "logs" / "dev").iterdir())


def test_a_run_whose_finish_is_left_out_holds_its_checkpoints_and_time_only(trained_mcnn_members):
    # The m-CNN members other than st are trained with train.main(argv, evaluate_test=False, export=False).
    for variant, run in trained_mcnn_members.items():
        finished = variant == "st"
        assert (run / "results.json").exists() == finished and (run / "saved_model").exists() == finished, variant
        for name in ("config.json", "vocab.json", "best/checkpoint", "checkpoints/checkpoint", "time_spent.json"):
            assert (run / name).exists(), (variant, name)


def test_tensorboard_logs_hold_loss_learning_rate_metrics_and_hparams(trained):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = set()
    for run in ("train", "dev"):
        accumulator = EventAccumulator(str(trained / "logs" / run), size_guidance={"tensors": 0})
        accumulator.Reload()
        tags |= set(accumulator.Tags()["tensors"])
    assert {"loss", "learning_rate", "rsum", "i2t_r1", "t2i_meanr", "_hparams_/session_start_info"} <= tags


ROUTING_DIAGNOSTICS = ("eq9_min_abs_denominator", "eq9_min_relative_denominator", "alpha_min", "alpha_max",
                      "mask_min", "mask_max")


@pytest.mark.parametrize("run", ["trained", "trained_rcn"])
def test_gradient_norms_and_model_diagnostics_are_in_tensorboard(run, request):
    import tensorflow as tf
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model_dir = request.getfixturevalue(run)
    accumulator = EventAccumulator(str(model_dir / "logs" / "train"), size_guidance={"tensors": 0})
    accumulator.Reload()
    values = {tag: [float(tf.make_ndarray(e.tensor_proto)) for e in accumulator.Tensors(tag)]
              for tag in accumulator.Tags()["tensors"]}
    steps = len(values["loss"])
    assert steps >= 2
    assert len(values["grad_norm"]) == len(values["grad_norm_max"]) == steps
    assert all(0 < mean <= peak for mean, peak in zip(values["grad_norm"], values["grad_norm_max"]))
    published = {tag for tag in values if tag.startswith("diagnostics/")}
    if run == "trained":
        assert published == set()
        return
    # rcn: 2 recursions (the trained_rcn fixture), the routing of passes 1-2.
    assert published == {f"diagnostics/rcn/pass_{t}/{name}" for t in range(1, 3) for name in ROUTING_DIAGNOSTICS}
    for t in range(1, 3):
        prefix = f"diagnostics/rcn/pass_{t}/"
        assert all(len(values[prefix + name]) == steps for name in ROUTING_DIAGNOSTICS)
        assert all(a <= b for a, b in zip(values[prefix + "alpha_min"], values[prefix + "alpha_max"]))
        assert all(a <= b for a, b in zip(values[prefix + "mask_min"], values[prefix + "mask_max"]))
        assert all(d > 0 for d in values[prefix + "eq9_min_abs_denominator"])


EXPORTED_RUNS = ["trained", "trained_rcn", "trained_w2vv", "trained_mcnn_st", "trained_mcnn_ens", "trained_fv",
                 "trained_ensemble"]
FRESH_CAPTIONS = ["A dog runs through the grass .", "two children play on a beach"]


@pytest.fixture(scope="module")
def fresh_process_outputs(request, tmp_path_factory):
    """{run: (features, what its SavedModel gave in a fresh process)} for
    every run of EXPORTED_RUNS: its encodings and scores of 3 random
    feature rows and FRESH_CAPTIONS, and its signatures. One process loads
    them all (starting one costs seconds)."""
    folder = tmp_path_factory.mktemp("fresh")
    runs = {}
    for run in EXPORTED_RUNS:
        model_dir = request.getfixturevalue(run)
        image_dim = json.loads((model_dir / "config.json").read_text())["image_features"]["width"]
        features = np.random.default_rng(0).uniform(0, 2, size=(3, image_dim)).astype(np.float32)
        np.save(folder / f"{run}.npy", features)
        runs[run] = (str(model_dir / "saved_model"), str(folder / f"{run}.npy"))
    script = f"""
import json, numpy as np, tensorflow as tf
out = {{}}
texts = tf.constant({FRESH_CAPTIONS!r})
for run, (export, features) in {runs!r}.items():
    loaded = tf.saved_model.load(export)
    features = np.load(features)
    out[run] = {{"text": loaded.encode_text(texts).numpy().tolist(),
                "image": loaded.encode_image(features).numpy().tolist(),
                "score": loaded.score(features, texts).numpy().tolist(),
                "signatures": sorted(loaded.signatures)}}
print(json.dumps(out))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=folder, check=True)
    out = json.loads(result.stdout.strip().splitlines()[-1])
    return {run: (np.load(runs[run][1]), out[run]) for run in EXPORTED_RUNS}


@pytest.mark.parametrize("run", EXPORTED_RUNS)
def test_saved_model_matches_keras_model_in_a_fresh_process(run, request, fresh_process_outputs):
    from models.restore import restore_model

    config, model = restore_model(request.getfixturevalue(run))
    features, out = fresh_process_outputs[run]
    text = model.encode_text(model.vectorizer(np.array(FRESH_CAPTIONS, dtype=object)))
    image = model.encode_image(features)
    np.testing.assert_allclose(out["text"], text, atol=1e-5)
    np.testing.assert_allclose(out["image"], image, atol=1e-5)
    np.testing.assert_allclose(out["score"], model.similarity(image, text), atol=1e-5)
    # The image signatures where the run's features record a backbone (the embedded ones do).
    images = ["encode_image_bytes", "score_images"] if model.image_features.provenance else []
    assert out["signatures"] == sorted(["encode_image", "encode_text", "score", "similarity", "serving_default", *images])


def test_existing_run_is_not_overwritten_and_a_finished_run_resumes_to_no_op(trained, short_test_data, tmp_path,
                                                                             capsys):
    run = light_copy(trained, tmp_path / trained.name, data=short_test_data)  # tested again on 100 images
    before = (run / "checkpoints" / "checkpoint").read_text()
    assert train.main(["--model", "gru", "--model-dir", str(run), *TINY]) == 2
    assert "already holds a training run" in capsys.readouterr().err
    assert (run / "checkpoints" / "checkpoint").read_text() == before
    # The run is complete: resuming it trains no further step (and tests it again; its export, which no
    # check here reads, is left out).
    first = json.loads((run / "results.json").read_text())
    assert train.main(["--model-dir", str(run), "--resume"], export=False) == 0
    assert (run / "checkpoints" / "checkpoint").read_text() == before
    # Its time is that of both processes.
    results = json.loads((run / "results.json").read_text())
    pieces = json.loads((run / "time_spent.json").read_text())["pieces"]
    assert results["pieces"] == first["pieces"] + 1 == len(pieces)
    assert results["wall_seconds"] == pytest.approx(sum(piece["wall_seconds"] for piece in pieces), abs=0.1)
    assert results["wall_seconds"] > first["wall_seconds"] and results["epochs"] == first["epochs"]
    # It is recorded with the command that made it, not the --resume that finished it.
    assert results["command"] == first["command"] and "--resume" not in results["command"]


def test_export_only(trained, tmp_path, caplog):
    run = light_copy(trained, tmp_path / trained.name)  # tests/engine/test_export.py exports with the image backbone
    caplog.set_level(logging.INFO, logger="absl")  # the level TensorFlow gives the notice below
    assert train.main(["--model-dir", str(run), "--export-only"]) == 0
    assert (run / "saved_model" / "saved_model.pb").exists()
    # No input of a signature has a name TensorFlow renames in the SavedModel (it would say so at INFO).
    assert not [record for record in caplog.records if "renamed" in record.getMessage()]


def test_list_names_each_models_presets_and_image_features(capsys):
    assert train.main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "gru: presets paper, quick" in lines
    assert "ph: presets paper, f30k, coco, quick; image features fc, fne" in lines


@pytest.mark.parametrize("argv, message", [
    (["--model", "nope"], "unknown model"),
    (["--model", "gru", "--set", "train.epochz=1"], "unknown key"),
    (["--model", "gru", "--data", "/nonexistent"], "/nonexistent"),
    (["--model-dir", "/nonexistent/run", "--resume"], "no config.json"),
    (["--model", "mcnn-st", "--set", "train.validate_max_images=0"], "train.validate_max_images must be >= 1"),
    (["--model", "mcnn-st", "--set", "model.members=a,b,c,d"], "--set 'model.members=a,b,c,d': unknown key"),
    (["--model", "mcnn-ens"], "m-CNN_ENS needs the model directories of its 4 members"),
    (["--model", "ensemble"], "model.members: an ensemble needs at least two run directories"),
    (["--model", "gru", "--set", "train.max_train_images=10", "--set", "train.batch_size=128"],
     "train.batch_size=128 is larger than the 50 training pairs"),
    (["--model", "gru", "--set", "train.learning_rate=-1"], "train.learning_rate must be > 0; got -1.0"),
    (["--model", "gru", "--image-features", "fne"], "--image-features 'fne': model 'gru' reads fc"),
    (["--model-dir", "/nonexistent/run", "--resume", "--image-features", "fne"],
     "take the configuration from --model-dir/config.json; drop --model, --set, --data and --image-features"),
    (["--model", "gru", "--strategy", "tpu"], "--strategy 'tpu': choose one of auto, default, mirrored, multiworker"),
])
def test_bad_arguments_give_one_line_errors(argv, message, capsys, tmp_path):
    argv = argv if "--model-dir" in argv else [*argv, "--model-dir", str(tmp_path / "run")]
    assert train.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()  # refused before anything is written


@pytest.mark.parametrize("argv, error", [
    (["--model", "nosuch"], "error: --model 'nosuch': unknown model; known models: ensemble, fv-gmm, "),
    (["--model", "gru", "--set", "epochs=2"], "error: --set 'epochs=2': unknown key; expected SECTION.KEY=VALUE "
     "with SECTION one of model, train, data, runtime"),
    (["--model-dir", "{tmp}/nowhere", "--resume"], "error: --resume: {tmp}/nowhere holds no training run (no config.json)"),
    (["--model", "gru", "--data", "{tmp}/nowhere"], "error: --data {tmp}/nowhere: no such folder"),
    (["--model", "gru", "--strategy", "nosuch"], "error: --strategy 'nosuch': choose one of auto, default, mirrored, "
     "multiworker"),
    (["--model", "gru", "--preset", "quik"], "error: --preset 'quik': model 'gru' has presets paper, quick"),
    (["--model", "gru", "--set", "train.epoch=2"], "error: --set 'train.epoch=2': unknown key; valid keys: "),
    (["--model", "gru", "--set", "train.epochs=two"], "error: train.epochs must be of type int; got 'two'"),
    (["--model", "gru", "--set", "train.epochs=0"], "error: train.epochs must be >= 1; got 0"),
    (["--model", "rcn", "--set", "model.routing=literl"],
     "error: model.routing must be one of literal, nonnegative; got 'literl'"),
    (["--model", "w2vv", "--set", "model.scales=bow,bow"], "error: model config: scales must be distinct values of "),
    (["--model", "fv-gmm", "--preset", "quick", "--set", "model.tokenizer=nltk"],
     "error: model.tokenizer must be one of treebank, alnum; got 'nltk'"),
    (["--model", "gru", "--image-features", "fne"], "error: --image-features 'fne': model 'gru' reads fc"),
    (["--model", "ensemble", "--set", "model.combination=mean"],
     "error: model.combination must be one of zscore, rank, sum; got 'mean'"),
    (["--model", "rerank", "--set", "model.k=0"], "error: model.k must be >= 1; got 0"),
    (["--model", "mcnn-st", "--set", "model.dropout=1"], "error: model.dropout must be < 1; got 1"),
    (["--model", "mcnn-ens", "--set", "model.members={run},{run},{run},{run}"],
     "error: {run}/config.json: a 'gru' run; the ensemble's wd member (model.members) must be a directory "
     "trained with --model mcnn-wd"),
    (["--model", "ensemble", "--set", "model.members={tmp}/no-run,{run}"],
     "error: {tmp}/no-run/config.json: no config.json"),
    # The second stage is read first (a first stage it holds is then not read again: models.members.rerank_stages).
    (["--model", "rerank", "--set", "model.members={tmp}/no-run,{run}"], "error: {run}/vocab.json: file not found"),
    (["--model", "gru", "--model-dir", "{run}"], "error: --model-dir {run} already holds a training run of these "
     "settings; continue it with `python train.py --model-dir {run} --resume`"),
], ids=["model", "set", "resume", "data", "strategy", "preset", "key", "type", "range", "choice", "config check",
        "tokenizer", "image features", "ensemble", "rerank", "m-CNN", "m-CNN members", "ensemble members",
        "rerank stages", "model-dir"])
def test_a_typo_is_refused_before_tensorflow_loads(argv, error, tmp_path):
    run = tmp_path / "run"  # a run of `gru` as far as its config.json tells
    run.mkdir()
    (run / "config.json").write_text(run_config_json(registry.get("gru").experiment("paper")))
    argv, error = [arg.format(tmp=tmp_path, run=run) for arg in argv], error.format(tmp=tmp_path, run=run)
    # The modules the command imported: not TensorFlow, which takes seconds to load.
    status, messages, imported = run_timing_imports(["train.py", *argv])
    assert status == 2 and len(messages) == 1 and messages[0].startswith(error)
    assert "common.errors" in imported and "tensorflow" not in imported and "keras" not in imported


def test_training_into_a_folder_of_photos_is_refused_and_leaves_it_as_it_was(tmp_path, capsys):
    photos = tmp_path / "photos"
    photos.mkdir()
    (photos / "beach.jpg").write_bytes(b"\xff\xd8 a beach")
    before = sorted(photos.iterdir())
    assert train.main(["--model", "gru", "--preset", "quick", "--model-dir", str(photos), *TINY]) == 2
    assert capsys.readouterr().err == (f"error: --model-dir {photos}: exists and is not a training run (a folder "
                                       "without config.json); choose a new name\n")
    assert sorted(photos.iterdir()) == before and (photos / "beach.jpg").read_bytes() == b"\xff\xd8 a beach"


def test_the_paper_presets_advice_starts_a_quick_run_as_written(tmp_path, monkeypatch, capsys):
    # The preset trap: `python train.py --model gru` (the paper preset, into runs/gru-paper) advises the quick
    # preset's command; after Ctrl-C that command, run as written, starts a quick run (here stopped once its
    # model directory is accepted), and so does the advice once runs/gru-quick holds a quick run too.
    from engine import training

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(training.tf.config, "list_physical_devices", lambda kind=None: [])  # a machine without a GPU
    paper = registry.get("gru").experiment("paper")
    (tmp_path / "runs" / "gru-paper").mkdir(parents=True)
    (tmp_path / "runs" / "gru-paper" / "config.json").write_text(run_config_json(paper))
    started = []

    def stop_before_the_data(trainer):
        started.append((trainer.model_dir, trainer.config.preset))
        raise InputError("stopped before the data")

    monkeypatch.setattr(training.Trainer, "_load_data", stop_before_the_data)
    for model_dir in ("runs/gru-quick", "runs/gru-quick-2"):
        advice = training.Trainer(paper, "runs/gru-paper")._quick_preset_advice()
        prefix = "the paper's settings are for a GPU; the 'quick' preset is sized for a CPU: "
        assert advice.startswith(prefix)
        command = shlex.split(advice.removeprefix(prefix))
        assert command[:2] == ["python", "train.py"]
        assert train.main(command[2:]) == 2
        assert capsys.readouterr().err == "error: stopped before the data\n"
        assert started.pop() == (Path(model_dir), "quick")
        (tmp_path / model_dir).mkdir()
        (tmp_path / model_dir / "config.json").write_text(run_config_json(registry.get("gru").experiment("quick")))


@pytest.mark.parametrize("caption, message", [
    (" ".join(["word"] * 600), "caption 17 has 600 tokens (treebank tokenizer); a caption needs 1 to 512"),
    ("\u2028", "line 17 is an empty caption"),
])
def test_a_bad_caption_in_the_test_split_stops_training_before_it_starts(caption, message, tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(EMBEDDED_DATA, data)
    lines = (data / "test_caps.txt").read_text().split("\n")
    lines[16] = caption
    (data / "test_caps.txt").write_text("\n".join(lines))
    argv = ["--model", "gru", "--data", str(data), "--model-dir", str(tmp_path / "run"), *TINY]
    assert train.main(argv) == 2
    assert f"error: {data / 'test_caps.txt'}: {message}" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # over 10 s on 2 cores
def test_sigkill_then_resume_ends_where_an_uninterrupted_run_ends(trained, tmp_path):
    model_dir = tmp_path / "killed"
    command = [sys.executable, "train.py", "--model", "gru", "--preset", "quick", "--model-dir", str(model_dir), *TINY]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (model_dir / "checkpoints" / "checkpoint").exists():
            assert process.poll() is None and time.monotonic() < deadline, "no checkpoint before the run ended"
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait()
    finally:
        process.kill()
    assert not (model_dir / "results.json").exists()
    (killed,) = json.loads((model_dir / "time_spent.json").read_text())["pieces"]
    assert train.main(["--model-dir", str(model_dir), "--resume"]) == 0
    expected = json.loads((trained / "results.json").read_text())
    resumed = json.loads((model_dir / "results.json").read_text())
    # The killed process's time, up to its last checkpoint, is counted.
    assert resumed["pieces"] == 2 and resumed["wall_seconds"] > killed["wall_seconds"] > 0
    assert killed["command"] == resumed["command"] and "--preset quick" in resumed["command"]
    for split in ("dev", "test"):
        for name, value in expected[split].items():
            assert resumed[split][name] == pytest.approx(value, abs=1e-6), (split, name)


@pytest.mark.slow  # over 10 s on 2 cores
def test_sigterm_mid_epoch_checkpoints_that_step_and_resume_ends_where_an_uninterrupted_run_ends(
        trained, tmp_path, monkeypatch, capsys):
    from engine import run_pace

    model_dir, before = tmp_path / "stopped", signal.getsignal(signal.SIGTERM)
    tick = run_pace.RunPace.tick

    def tick_then_sigterm_at_step_4(pace, step):
        tick(pace, step)
        if step == 4:  # mid-epoch, before the first validation (step 7)
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(run_pace.RunPace, "tick", tick_then_sigterm_at_step_4)
    argv = ["--model", "gru", "--preset", "quick", *TINY, "--model-dir", str(model_dir)]
    assert train.main(argv) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"interrupted: the training state is kept in {model_dir / 'checkpoints' / 'ckpt-4'}; "
        f"continue with `python train.py --model-dir {model_dir} --resume`")
    monkeypatch.undo()
    assert signal.getsignal(signal.SIGTERM) is before
    assert train.main(["--model-dir", str(model_dir), "--resume"]) == 0
    expected = json.loads((trained / "results.json").read_text())
    resumed = json.loads((model_dir / "results.json").read_text())
    assert resumed["pieces"] == 2
    for split in ("dev", "test"):
        for name, value in expected[split].items():
            assert resumed[split][name] == pytest.approx(value, abs=1e-6), (split, name)


@pytest.mark.slow  # over 10 s on 2 cores
def test_sigint_as_a_validation_begins_stops_the_run_within_seconds_and_the_resumed_run_validates_that_step_first(
        trained, tmp_path):
    # A validation can take minutes: a Ctrl-C stops it at once, keeping the step with its validation due.
    model_dir = tmp_path / "stopped"
    command = [sys.executable, "train.py", "--model", "gru", "--preset", "quick", *TINY, "--set", "train.log_every=1",
               "--model-dir", str(model_dir)]
    # Python's own Ctrl-C handling, whatever the test runner's process does with SIGINT.
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        for line in process.stderr:
            if " step 7 loss " in line:  # logged as step 7's validation begins (one every 7 steps)
                process.send_signal(signal.SIGINT)
                sent = time.monotonic()
                break
        after = process.stderr.read().strip().splitlines()
        assert process.wait(timeout=60) == 130
        seconds = time.monotonic() - sent
    finally:
        process.kill()
    assert seconds < 20, after  # the checkpoint of a step and the process's exit
    assert not [line for line in after if "dev at step" in line or " step 8 " in line], after
    assert after[-1] == (f"interrupted: the training state is kept in {model_dir / 'checkpoints' / 'ckpt-7'}; "
                         f"continue with `python train.py --model-dir {model_dir} --resume`")
    done = subprocess.run([sys.executable, "train.py", "--model-dir", str(model_dir), "--resume"], cwd=REPO,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
    assert done.returncode == 0 and "validating step 7 first: the run stopped during its validation" in done.stderr
    expected = json.loads((trained / "results.json").read_text())
    resumed = json.loads((model_dir / "results.json").read_text())
    for split in ("dev", "test"):
        for name, value in expected[split].items():
            assert resumed[split][name] == pytest.approx(value, abs=1e-6), (split, name)


def _digests(directory):
    """{relative path: (size, mtime)} of every file below `directory`."""
    return {str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_damaged_checkpoints_are_named_and_resuming_falls_back_to_an_intact_one(trained, tmp_path, capsys, caplog):
    import evaluate

    run = tmp_path / "run"
    shutil.copytree(trained, run)
    (best,) = (run / "best").glob("ckpt-*.data-*")
    os.truncate(best, best.stat().st_size // 2)
    before = _digests(run)
    assert evaluate.main(["--model-dir", str(run)]) == 2
    assert train.main(["--model-dir", str(run), "--export-only"]) == 2
    for err in capsys.readouterr().err.strip().splitlines():
        assert err.startswith(f"error: {best.with_suffix('').with_suffix('')}: damaged checkpoint (") and "train it again" in err
    assert _digests(run) == before  # the export and everything else untouched

    # The newest training checkpoint damaged: --resume takes the one before.
    shutil.rmtree(run)
    shutil.copytree(trained, run)
    indexes = sorted((run / "checkpoints").glob("ckpt-*.index"), key=lambda p: int(p.stem.split("-")[1]))
    indexes[-1].write_bytes(b"not a checkpoint index")
    caplog.set_level("INFO", logger="train")
    # The resumed run's last steps, no test or export (which no check here reads): what is asked is where it resumed.
    assert train.main(["--model-dir", str(run), "--resume"], evaluate_test=False, export=False) == 0
    assert f"{indexes[-1].with_suffix('')}: damaged checkpoint" in caplog.text
    assert f"resumed from {indexes[-2].with_suffix('')}" in caplog.text
    # All of them damaged: an error, before anything is written.
    for index in (run / "checkpoints").glob("ckpt-*.index"):
        index.write_bytes(b"")
    before = _digests(run)
    capsys.readouterr()
    assert train.main(["--model-dir", str(run), "--resume"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (f"error: {run / 'checkpoints'}: every checkpoint is damaged; "
                                               "start the run again in a new --model-dir")
    assert _digests(run) == before


def test_a_vocabulary_that_does_not_fit_the_checkpoint_is_named(trained, tmp_path, capsys):
    import evaluate

    run = tmp_path / "run"
    shutil.copytree(trained, run)
    vocabulary = json.loads((run / "vocab.json").read_text())
    vocabulary["tokens"] += [f"extra{i}" for i in range(50)]
    vocabulary["counts"] = vocabulary.get("counts") and vocabulary["counts"] + [1] * 50
    (run / "vocab.json").write_text(json.dumps(vocabulary))
    before = _digests(run)
    assert evaluate.main(["--model-dir", str(run)]) == 2
    assert "the checkpoint does not fit the model configured in" in capsys.readouterr().err
    assert train.main(["--model-dir", str(run), "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"error: {run / 'checkpoints'}/ckpt-") and "does not fit the model built from" in err
    assert "embedding" in err and err.endswith("were they edited?")
    assert _digests(run) == before


def test_a_full_disk_during_export_is_one_line_and_keeps_the_previous_export(trained, tmp_path):
    """A file size limit (RLIMIT_FSIZE, as a full disk or a quota would)
    stops the export's writes; the previous export stays as it was."""
    import resource

    run = light_copy(trained, tmp_path / "run")  # the error is the same with an image backbone, seconds later
    before = _digests(run)

    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    done = subprocess.run([sys.executable, "train.py", "--model-dir", str(run), "--export-only"], cwd=REPO,
                          preexec_fn=limit_file_size, capture_output=True, text=True, timeout=300)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2 and errors == [
        f"error: {run / 'saved_model'}: the SavedModel cannot be written (File too large); any previous export is unchanged"]
    assert _digests(run) == before and not list(run.glob(".saved_model*"))


def test_output_paths_are_checked_before_any_work(trained, tmp_path, capsys):
    import evaluate

    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    assert train.main(["--model", "gru", "--model-dir", str(a_file), *TINY]) == 2
    assert capsys.readouterr().err.strip() == f"error: --model-dir {a_file}: exists and is not a training run (a file)"
    assert a_file.read_text() == "mine"
    assert evaluate.main(["--model-dir", str(trained), "--json", str(tmp_path / "missing" / "m.json")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: --json {tmp_path / 'missing' / 'm.json'}: the directory {tmp_path / 'missing'} does not exist")
    os.mkfifo(tmp_path / "config.json")
    assert evaluate.main(["--model-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'config.json'}: not a regular file (a directory, FIFO or device)"


def test_saved_model_rejects_empty_and_over_long_captions(trained):
    import tensorflow as tf

    from engine.evaluation import refusal_reason

    loaded = tf.saved_model.load(str(trained / "saved_model"))
    for text, message in (("", "empty caption"), ("dog " * 513, "more than 512 tokens")):
        with pytest.raises(tf.errors.InvalidArgumentError) as error:
            loaded.encode_text(tf.constant(["a dog", text]))
        assert message in refusal_reason(error.value)


@pytest.mark.slow  # over 10 s on 2 cores
def test_early_stopping_and_reduce_on_plateau(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model_dir = tmp_path / "stalled"
    # A learning rate this small cannot change any rank: no validation after
    # the first improves, so the plateau cuts the rate and training stops.
    stalled = [*TINY, "--set", "train.learning_rate=1e-12", "--set", "train.validate_every=3",
               "--set", "train.early_stopping_patience=2", "--set", "train.plateau_patience=1",
               "--set", "train.log_every=1"]
    assert train.main(["--model", "gru", "--preset", "quick", "--model-dir", str(model_dir), *stalled]) == 0
    assert (model_dir / "checkpoints" / "ckpt-9.index").exists()
    assert not (model_dir / "checkpoints" / "ckpt-12.index").exists()
    accumulator = EventAccumulator(str(model_dir / "logs" / "train"), size_guidance={"tensors": 0})
    accumulator.Reload()
    rates = {e.step: float(tf_value(e)) for e in accumulator.Tensors("learning_rate")}
    assert rates[6] == pytest.approx(1e-12) and rates[7] == pytest.approx(1e-13) and max(rates) == 9


def tf_value(event):
    import tensorflow as tf

    return tf.make_ndarray(event.tensor_proto)


@pytest.mark.slow  # over 10 s on 2 cores
def test_a_resumed_model_with_dropout_ends_as_an_uninterrupted_run(tmp_path, monkeypatch, capsys):
    # The dropout masks' random state is checkpointed with the weights, so
    # a run interrupted after its first checkpoint draws the same masks
    # after resuming.
    from engine import training_loop

    argv = ["--model", "w2vv-bow", "--preset", "quick", "--set", "model.hidden_units=[32]",
            "--set", "train.max_train_images=100", "--set", "train.batch_size=50", "--set", "train.epochs=2",
            "--set", "train.validate_every=3"]
    assert train.main([*argv, "--model-dir", str(tmp_path / "whole")]) == 0
    original = training_loop.TrainingLoop._validate_and_save

    def interrupted(loop, result):
        original(loop, result)
        raise KeyboardInterrupt

    monkeypatch.setattr(training_loop.TrainingLoop, "_validate_and_save", interrupted)
    capsys.readouterr()
    assert train.main([*argv, "--model-dir", str(tmp_path / "resumed")]) == 130
    # Ctrl-C: one line naming the checkpoint kept (the first validation's,
    # step 3) and the command that continues, no traceback.
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"interrupted: the training state is kept in {tmp_path / 'resumed' / 'checkpoints' / 'ckpt-3'}; "
        f"continue with `python train.py --model-dir {tmp_path / 'resumed'} --resume`")
    monkeypatch.undo()
    assert train.main(["--model-dir", str(tmp_path / "resumed"), "--resume"]) == 0
    whole = json.loads((tmp_path / "whole" / "results.json").read_text())
    resumed = json.loads((tmp_path / "resumed" / "results.json").read_text())
    assert resumed["dev"] == whole["dev"] and resumed["test"] == whole["test"]


def test_plot_training_draws_the_runs_scalars_from_their_event_files(trained, trained_rcn, tmp_path, capsys):
    from tools import plot_training

    out = tmp_path / "runs.png"
    tag = "diagnostics/rcn/pass_1/eq9_min_relative_denominator"
    argv = [str(trained), str(trained_rcn), "--panel", "grad_norm_max", "--panel", tag, "--panel", "dev:rsum",
            "--out", str(out)]
    assert plot_training.main(argv) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    series = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    # The GRU run publishes no routing diagnostics: left out of that panel.
    assert [(s["run"], s["panel"]) for s in series] == [
        (str(trained), "grad_norm_max"), (str(trained_rcn), "grad_norm_max"), (str(trained_rcn), tag),
        (str(trained), "dev:rsum"), (str(trained_rcn), "dev:rsum")]
    for s in series:
        kind, name = ("dev", "rsum") if s["panel"] == "dev:rsum" else ("train", s["panel"])
        assert (s["steps"], s["values"]) == plot_training.read_scalars(s["run"], kind)[name]
    assert plot_training.main([str(trained), "--panel", tag, "--out", str(tmp_path / "x.png")]) == 2
    assert "no run has the tag" in capsys.readouterr().err and not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("run, joint", [("trained", True), ("trained_mcnn_st", False), ("trained_mcnn_ens", False),
                                        ("trained_fv", True), ("trained_ensemble", False)])
def test_sentence_similarity_only_for_models_with_a_joint_space(run, joint, request):
    """m-CNN's encodings are halves of its matching network (for `st` of the
    same size): no caption-to-caption task, in results.json or from the
    export."""
    from engine import scoring

    model_dir = request.getfixturevalue(run)
    assert ("t2t_meanr" in json.loads((model_dir / "results.json").read_text())["test"]) == joint
    assert scoring.SavedModelScorer(model_dir / "saved_model").joint_space == joint
