import ast
import json
from pathlib import Path

import numpy as np
import pytest

from common import machine
from common.errors import InputError
from data.readers import RetrievalSplit
from tests.helpers import cut_splits
from tools import bench, timing

FAMILIES = ("fisher_vectors", "fne_pipelines", "mcnn", "rcn", "vse", "w2vv")
TINY = ["--set", "model.word_dim=8", "--set", "model.embed_dim=16", "--steps", "2", "--warmup", "1"]


@pytest.fixture(scope="module")
def short_training_data(tmp_path_factory):
    """The embedded data with a training split of its first 200 images."""
    return cut_splits(tmp_path_factory.mktemp("data") / "short_training", {"train": 200})


def read_record(path):
    """The record --record wrote, after checking its envelope's fields."""
    record = json.loads(Path(path).read_text())
    assert list(record) == ["version", "command", "date", "cores", "cpu", "load_average", "python", "tensorflow", "reports"]
    assert isinstance(record["reports"], list) and all(isinstance(report, dict) for report in record["reports"])
    return record


@pytest.mark.slow  # over 10 s on 2 cores
def test_bench_reports_throughput_and_cost_relative_to_the_first_model(tmp_path, capsys):
    argv = ["--model", "rcn-gru", "--model", "rcn", "--preset", "quick", *TINY, "--skip-eval"]
    assert bench.main([*argv[:4], f"--record={tmp_path / 'bench.json'}", *argv[4:]]) == 0
    out, err = capsys.readouterr()
    first, second = json.loads(out)
    record = read_record(tmp_path / "bench.json")
    assert record["command"] == "python -m tools.bench " + " ".join(argv)  # without --record=FILE
    assert record["reports"] == [first, second]
    assert err.startswith("hardware: CPU native bf16 ") and "\nprecision: runtime.mixed_precision=" in err
    assert (first["model"], second["model"]) == ("rcn-gru", "rcn")
    assert first["train_pairs_per_s"] > 0 and "eval_seconds" not in first
    assert second["step_time_vs_first"] == round(second["train_step_ms"] / first["train_step_ms"], 2)
    # GFLOP/s: 3 x the forward products' count over the timed steps' time.
    for report in (first, second):
        rate = report["train_gflop_per_step"] / (report["train_step_ms"] / 1000)
        assert report["train_gflops_per_s"] > 0 and abs(report["train_gflops_per_s"] - rate) < 0.02 * rate
        assert report["machine_matmul_gflops_per_s"] > 0
        assert report["isa"] == str(machine.instruction_set())
    assert second["train_gflop_per_step"] > first["train_gflop_per_step"]  # 4 capsules, 4 recursions


def test_bench_prints_the_hardware_and_the_precision_to_use_and_exits(tmp_path, capsys):
    assert bench.main(["--hardware", "--record", str(tmp_path / "hardware.json")]) == 0
    hardware_line, precision_line = capsys.readouterr().out.splitlines()
    assert hardware_line.startswith("hardware: CPU native bf16 ")
    assert precision_line.split()[:2] in (["precision:", f"runtime.mixed_precision={p}"] for p in ("none", "bf16", "fp16"))
    record = read_record(tmp_path / "hardware.json")
    assert record["command"] == "python -m tools.bench --hardware"
    assert record["reports"] == [{"hardware": hardware_line.removeprefix("hardware: "),
                                  "precision": precision_line.removeprefix("precision: ")}]


def test_bad_input_is_a_one_line_error(capsys):
    assert bench.main(["--model", "gru", "--preset", "huge"]) == 2
    assert capsys.readouterr().err.strip() == "error: --preset 'huge': model 'gru' has presets paper, quick"


def test_bench_times_the_up_front_data_checks(tmp_path, capsys):
    assert bench.main(["--data-checks", "--model", "w2vv", "--record", str(tmp_path / "checks.json")]) == 0
    [report] = json.loads(capsys.readouterr().out)
    assert read_record(tmp_path / "checks.json")["reports"] == [report]
    assert (report["model"], report["tokenizer"], report["captions"]) == ("w2vv", "alnum", 40000)
    assert report["read_and_check_splits_s"] > 0 and report["caption_checks_s"] > 0


def test_bench_times_evaluation(tmp_path, capsys):
    record_file = tmp_path / "bench.json"
    data = cut_splits(tmp_path / "data", {"train": 200, "dev": 100})
    argv = ["--model", "gru", "--preset", "quick", *TINY, "--set", f"data.path={data}", "--eval-split", "dev",
            "--record", str(record_file)]
    assert bench.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert read_record(record_file)["reports"] == [report]  # one report: a list of one
    # The whole dev split: its 100 images and their 500 captions.
    assert report["eval_images"] == 100 and report["eval_captions"] == 500 and report["eval_seconds"] > 0
    assert report["isa"] == str(machine.instruction_set())  # which kernels the figures ran on


def test_bench_times_the_evaluation_of_an_ensemble_at_a_larger_size(trained_mcnn_members, tmp_path, capsys):
    members = ",".join(str(trained_mcnn_members[v]) for v in ("wd", "phs", "phl", "st"))
    data = cut_splits(tmp_path / "data", {"train": 200, "test": 100})  # 150 images: the test split repeated
    argv = ["--model", "mcnn-ens", "--preset", "quick", "--eval-only", "--eval-images", "150",
            "--set", f"data.path={data}", "--set", f"model.members={members}"]
    assert bench.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["eval_images"] == 150 and report["eval_captions"] == 750 and "train_step_ms" not in report
    assert report["eval_seconds"] > 0 and report["peak_rss_mb"] > 0


@pytest.mark.slow  # over 10 s on 2 cores
def test_bench_cost_measures_each_stage_in_a_process_of_its_own(tmp_path, capsys):
    argv = ["--cost", "--model", "gru", "--preset", "quick", *TINY, "--record", str(tmp_path / "cost.json")]
    assert bench.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert read_record(tmp_path / "cost.json")["reports"] == [report]
    assert report["train_pairs_per_s"] > 0 and report["batch_size"] == 128 and report["train_peak_rss_mb"] > 0
    # The embedded training split's 30,000 captions at the measured rate, and the quick preset's 4 epochs.
    assert report["epoch_pairs"] == 30_000 and report["max_epochs"] == 4
    assert report["epoch_minutes"] == pytest.approx(30_000 / report["train_pairs_per_s"] / 60, abs=0.05)
    assert report["max_epochs_hours"] == pytest.approx(4 * report["epoch_minutes"] / 60, abs=0.05)
    # One validation (the whole dev split: the quick preset cuts none) at each epoch's end.
    assert report["validate_images"] == 1000 and report["validations_per_epoch"] == 1 and report["validate_seconds"] > 0
    assert report["run_hours"] == pytest.approx(4 * (report["epoch_minutes"] * 60 + report["validate_seconds"]) / 3600,
                                                abs=0.05)
    assert (report["eval_1k_images"], report["eval_1k_captions"]) == (1000, 5000)
    assert (report["eval_5k_images"], report["eval_5k_captions"]) == (5000, 25000)
    assert report["eval_5k_seconds"] > report["eval_1k_seconds"] > 0
    assert report["encode_captions_per_s"] > 0 and report["encode_images_per_s"] > 0 and report["saved_model_mb"] > 0
    # Each peak is its own stage's: the 5K evaluation's score matrix
    # (5,000 x 25,000 floats, 500 MB) is in no other stage's peak.
    assert report["eval_5k_peak_rss_mb"] > report["eval_1k_peak_rss_mb"] + 400
    assert report["eval_5k_peak_rss_mb"] > report["encode_peak_rss_mb"] + 400


def test_a_whole_run_is_its_epochs_of_training_and_validations():
    # 40 epochs of 1.5 min, each with 3 validations of 10 s: 40 × 120 s = 1.33 h.
    report = {"epoch_minutes": 1.5, "validations_per_epoch": 3, "validate_seconds": 10.0, "max_epochs": 40}
    assert bench.whole_run_hours(report) == 1.3


def test_the_validation_stage_validates_the_presets_dev_cut(short_training_data):
    args = bench.parse_args(["--cost", "--model", "gru", "--preset", "quick", *TINY,
                             "--set", "train.validate_max_images=50", "--set", f"data.path={short_training_data}"])
    report = bench.cost_stage("validate", "gru", args)
    assert report["validate_images"] == 50 and report["validate_seconds"] > 0 and report["validate_peak_rss_mb"] > 0


def test_the_cost_of_a_phased_preset_counts_every_phase(short_training_data):
    # poe's paper preset: 2 phases of 200 epochs, 200 in all (Vilalta et al. cap a run at 200 epochs).
    from engine.training import epochs_at_most
    from models import registry
    from tools.timing import untrained_model

    overrides = ["model.embed_dim=16", f"data.path={short_training_data}"]
    config, _, model = untrained_model("poe", "paper", overrides)
    assert model.num_phases == 2 and epochs_at_most(model, config.train) == 200
    # Without the cap (the same model: the option is the trainer's).
    config = registry.get("poe").experiment("paper", [*overrides, "train.epochs_in_all=null"])
    assert epochs_at_most(model, config.train) == 400


def test_bench_cost_of_a_fitted_model_has_no_training_stage(short_training_data):
    args = bench.parse_args(["--cost", "--model", "fv-mean", "--preset", "paper", "--set",
                             f"data.path={short_training_data}"])
    assert bench.cost_stage("train", "fv-mean", args) == {}  # no gradient steps; its family benchmark times the fit


def test_bench_cost_takes_no_evaluation_options(capsys):
    with pytest.raises(SystemExit) as exit_status:
        bench.main(["--cost", "--eval-images", "5000"])
    assert exit_status.value.code == 2
    assert "--cost measures training and both evaluation sizes" in capsys.readouterr().err


def test_a_repeated_split_keeps_each_images_captions():
    split = RetrievalSplit(images=np.arange(6, dtype=np.float32).reshape(3, 2), captions=["a", "b", "c", "d"],
                           caption_image=np.array([0, 1, 1, 2]), image_ids=["x", "y", "z"], source="hand")
    repeated = bench.repeated_split(split, 5)  # images x y z x y
    np.testing.assert_array_equal(repeated.images[:, 0], [0, 2, 4, 0, 2])
    assert repeated.captions == ["a", "b", "c", "d", "a", "b", "c"] and repeated.image_ids == ["x", "y", "z", "x", "y"]
    np.testing.assert_array_equal(repeated.caption_image, [0, 1, 1, 2, 3, 4, 4])


def test_bench_times_a_saved_models_caption_encoding(trained, tmp_path, capsys):
    assert bench.main(["--encode", str(trained / "saved_model"), "--record", str(tmp_path / "encode.json")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert read_record(tmp_path / "encode.json")["reports"] == [report]
    assert report["captions"] == 5000 and report["captions_per_s"] > 0


@pytest.mark.parametrize("module", [bench, timing])
def test_bench_imports_no_model_family(module):
    # The family benchmarks have modules of their own (tools.bench_fisher_vectors, ...).
    tree = ast.parse(Path(module.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {f"models.{alias.name}" for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module == "models" for alias in node.names}
    assert imported & {f"models.{family}" for family in FAMILIES} == set()
    assert "hasattr" not in Path(module.__file__).read_text()


def test_every_numeric_argument_of_the_benchmarks_is_range_checked(capsys):
    """Each count of tools/bench*.py rejects 0 (or -1 where 0 is allowed) and
    a non-integer with argparse's one-line usage error, status 2."""
    from tools import bench_order_similarity, bench_vsepp

    cases = [
        (bench.parse_args, ["--steps", "0"], "--steps: must be at least 1; got 0"),
        (bench.parse_args, ["--warmup", "-1"], "--warmup: must be at least 0; got -1"),
        (bench.parse_args, ["--steps", "2.5"], "--steps: expected an integer; got '2.5'"),
        (bench_vsepp.parse_args, ["clone", "--rounds", "0"], "--rounds: must be at least 1; got 0"),
        (bench_vsepp.parse_args, ["clone", "--steps", "-3"], "--steps: must be at least 1; got -3"),
        (bench_order_similarity.parse_args, ["--images", "0"], "--images: must be at least 1; got 0"),
        (bench_order_similarity.parse_args, ["--images", "2", "--dim", "0"], "--dim: must be at least 1; got 0"),
    ]
    for parse, argv, message in cases:
        with pytest.raises(SystemExit) as exit_:
            parse(argv)
        assert exit_.value.code == 2
        assert capsys.readouterr().err.strip().splitlines()[-1].endswith(f"argument {message}"), argv


def test_bench_times_a_two_stage_model_on_its_listed_pairs(trained, trained_mcnn_ens, short_training_data,
                                                           monkeypatch):
    # 20 images and their 100 captions, lists of k = 5: the second stage scores (20 + 100) x 5 = 600
    # pairs, not the 2,000 of the whole matrix.
    import dataclasses

    from engine import evaluation

    scored = []
    original = evaluation.rank_two_stage

    def counting(two_stage, *arguments):
        pairs = two_stage.score_pairs
        return original(dataclasses.replace(two_stage, score_pairs=lambda *a: scored.append(len(a[2])) or pairs(*a)),
                        *arguments)

    monkeypatch.setattr(evaluation, "rank_two_stage", counting)
    args = bench.parse_args(["--model", "rerank", "--eval-only", "--eval-images", "20",
                             "--set", f"model.members={trained},{trained_mcnn_ens}", "--set", "model.k=5",
                             "--set", f"data.path={short_training_data}"])
    report = bench.measure("rerank", args)
    assert (report["eval_images"], report["eval_captions"], report["rerank_k"]) == (20, 100, 5)
    assert sum(scored) == 600


def test_bench_asks_an_untrained_two_stage_model_for_its_list_length(trained, trained_mcnn_ens, short_training_data):
    args = bench.parse_args(["--model", "rerank", "--eval-only", "--eval-images", "20",
                             "--set", f"model.members={trained},{trained_mcnn_ens}",
                             "--set", f"data.path={short_training_data}"])
    with pytest.raises(InputError, match="no list length chosen on dev; give it one, e.g. --set model.k=20"):
        bench.measure("rerank", args)
