"""tf.distribute: one replica and two replicas train the same model.

Hardest negatives must be searched over the global batch, so the loss is
computed on embeddings gathered from all replicas. This runs in a
subprocess because logical CPU devices must be configured before TensorFlow
initialises.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import REPO

SCRIPT = r"""
import json, sys
import numpy as np, tensorflow as tf, keras
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from engine.train_step import make_optimizer, make_train_step
from data import pipeline
from data.image_features import ImageFeatures
from models import registry

VOCABULARY = ["<pad>", "<unk>"] + [f"w{i}" for i in range(30)]
spec = registry.get("gru")
config = spec.experiment("paper", ["model.word_dim=8", "model.embed_dim=16", "train.batch_size=8",
                                   "model.hinge=max", "train.grad_clip_norm=0.05"])
rng = np.random.default_rng(0)
ids = np.zeros((40, 6), np.int32)
lengths = rng.integers(2, 7, size=40)
for row, length in enumerate(lengths):
    ids[row, :length] = rng.integers(2, 32, size=length)
data = pipeline.TokenizedSplit(rng.normal(size=(8, 12)).astype(np.float32), ids, lengths.astype(np.int32),
                               np.repeat(np.arange(8), 5))

def train(strategy):
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = spec.build_model(config.model, VOCABULARY, ImageFeatures("fc", 12))
        optimizer = make_optimizer(config.train)
        optimizer.build(model.trainable_variables)
    step = make_train_step(model, optimizer, strategy, config.train.grad_clip_norm)
    replicas = strategy.num_replicas_in_sync
    batches = pipeline.epoch_order(data, "all_captions", 8, seed=0, epoch=0)
    per_replica = batches.reshape(len(batches), replicas, -1).reshape(-1, 8 // replicas)
    dataset = strategy.distribute_datasets_from_function(lambda ctx: pipeline.training_dataset(data, per_replica))
    losses = [float(step(batch)["loss"]) for batch in dataset]
    return losses, [v.numpy().tolist() for v in model.trainable_variables]

one = train(tf.distribute.OneDeviceStrategy("/cpu:0"))
two = train(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
print(json.dumps({"one": one, "two": two}))
"""


@pytest.mark.slow  # over 10 s on 2 cores
def test_one_and_two_replicas_train_the_same_model():
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=REPO, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    (losses_one, weights_one), (losses_two, weights_two) = out["one"], out["two"]
    assert len(losses_one) == 5
    assert losses_one == pytest.approx(losses_two, rel=1e-5)
    for a, b in zip(weights_one, weights_two):
        np.testing.assert_allclose(np.array(a), np.array(b), atol=1e-5)
