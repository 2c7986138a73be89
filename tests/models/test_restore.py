"""`models.restore`: a trained run's model back from its directory, with
its best weights and the image features it trained on. (Damaged
checkpoints and settings that do not fit the weights: tests/test_train.py.)"""

import json

import numpy as np
import tensorflow as tf

from data.image_features import ImageFeatures
from models.experiments import load_run
from models.restore import restore_model


def test_a_trained_run_comes_back_with_its_best_weights_and_its_image_features(trained):
    run, model = restore_model(trained)
    assert run == load_run(trained)
    recorded = json.loads((trained / "config.json").read_text())["image_features"]
    assert model.image_features == ImageFeatures(**recorded) and recorded["width"] == 1280
    assert recorded["kind"] == "fc" and recorded["provenance"]["backbone"] == "efficientnet-lite0"
    # Every weight of the model is a tensor of the best checkpoint, as the checkpoint reader reads it.
    reader = tf.train.load_checkpoint(str(trained / "best"))
    saved = [reader.get_tensor(key) for key in reader.get_variable_to_shape_map() if "OPTIMIZER_SLOT" not in key]
    for weight in model.weights:
        value = weight.numpy()
        assert any(tensor.shape == value.shape and np.array_equal(tensor, value) for tensor in saved), weight.path
