"""MultiWorkerMirroredStrategy: two worker processes on localhost train one
model from TF_CONFIG (slow: two TensorFlow processes)."""

import json
import os
import socket
import subprocess
import sys

import pytest

from tests.helpers import REPO

TINY = [
    "--set", "model.word_dim=16", "--set", "model.embed_dim=32", "--set", "train.epochs=1",
    "--set", "train.batch_size=32", "--set", "train.max_train_images=64",
]


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.mark.slow
def test_two_workers_on_localhost_train_and_export(tmp_path):
    workers = [f"localhost:{port}" for port in free_ports(2)]
    model_dir = tmp_path / "run"
    processes = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        env = dict(os.environ, TF_CONFIG=json.dumps(tf_config), TF_CPP_MIN_LOG_LEVEL="2")
        command = [sys.executable, "train.py", "--model", "gru", "--preset", "quick", "--strategy", "multiworker",
                   "--model-dir", str(model_dir), *TINY]
        processes.append(subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
    outputs = [p.communicate(timeout=600)[0] for p in processes]
    for process, output in zip(processes, outputs):
        assert process.returncode == 0, output[-3000:]
    results = json.loads((model_dir / "results.json").read_text())
    assert results["test"]["rsum"] > 0
    # --strategy is recorded in the run's runtime section.
    assert json.loads((model_dir / "config.json").read_text())["runtime"]["strategy"] == "multiworker"
    assert (model_dir / "saved_model" / "saved_model.pb").exists()
