from types import SimpleNamespace

import numpy as np

from engine import train_step
from tools import timing


def test_the_model_and_its_step_are_built_under_the_runtime_settings(monkeypatch):
    runtime = ["runtime.mixed_precision=fp16", "runtime.jit_compile=true"]
    config, _, model = timing.untrained_model("gru", "quick", ["model.word_dim=8", "model.embed_dim=16", *runtime])
    assert model.word_embedding.compute_dtype == "float16"
    calls = {}

    def spy(name):
        function = getattr(train_step, name)

        def recorded(*args):
            calls[name] = args
            return function(*args)

        monkeypatch.setattr(train_step, name, recorded)

    spy("make_optimizer")
    spy("make_train_step")
    timing.zoo_step(model, config, warmup_batches=[])  # not run: only built
    assert calls["make_optimizer"][1] == "fp16" and calls["make_train_step"][-1] is True


def test_peak_memory_is_linuxs_high_water_mark_of_this_process(tmp_path):
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmPeak:\t 9999999 kB\nVmHWM:\t 2097152 kB\nVmRSS:\t 1024 kB\n")
    assert timing.peak_rss_mb(status) == 2048
    assert timing.peak_rss_mb(tmp_path / "absent") > 0  # ru_maxrss where there is no /proc


def test_throughput_is_pairs_per_second_and_milliseconds_per_step():
    config = SimpleNamespace(train=SimpleNamespace(batch_size=128))
    assert timing.throughput(config, steps=10, seconds=4.0) == {"train_pairs_per_s": 320.0, "train_step_ms": 400.0}


def test_time_steps_runs_the_step_once_a_batch():
    seen = []
    assert timing.time_steps(seen.append, ["a", "b", "c"]) >= 0 and seen == ["a", "b", "c"]


def test_a_training_steps_flops_are_three_forward_passes_or_none():
    class Model:
        def __init__(self, flops_per_caption):
            self.flops_per_caption = flops_per_caption

        def forward_flops(self, token_ids, image_features):
            return None if self.flops_per_caption is None else self.flops_per_caption * len(token_ids)

    batches = [{"token_ids": SimpleNamespace(numpy=lambda n=n: np.ones((n, 5))),
                "image_features": SimpleNamespace(numpy=lambda n=n: np.ones((n, 3)))} for n in (2, 4)]
    assert timing.training_flops(Model(10), batches) == 3 * (20 + 40) / 2
    assert timing.training_flops(Model(None), batches) is None


def test_significant_keeps_four_significant_digits():
    assert timing.significant(123456.7) == 123500.0 and timing.significant(0.000123456) == 0.0001235
