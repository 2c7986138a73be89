"""The Full-Network Embedding's standardisation and discretisation."""

import keras
import numpy as np
from keras import ops


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class FullNetworkEmbedding(keras.layers.Layer):
    """Raw per-layer CNN features -> the Full-Network Embedding
    (Garcia-Gasulla et al. 2018; Vilalta et al. 2018, Sec. 3.1).

    The input is every layer's activations, convolutional ones spatially
    averaged, concatenated. Each feature is standardised with the mean and
    standard deviation of the *training images* (`adapt`), then discretised:

        z = (x - mean) / std
        fne(z) = -1 if z < -0.25,  1 if z > 0.15,  0 otherwise

    (the thresholds of the FNE work, which Vilalta et al. keep). The
    statistics are non-trainable weights, so they are saved with the model
    and applied inside its SavedModel: users feed raw per-layer features. A
    feature constant over the training images (std 0) is divided by 1, so it
    maps to 0 wherever it keeps its training value.

    Args:
      negative_threshold: z below this is -1 (-0.25).
      positive_threshold: z above this is 1 (0.15).

    Call args:
      features: float [B, F], raw per-layer features.

    Returns:
      float [B, F] in {-1, 0, 1}.
    """

    def __init__(self, negative_threshold=-0.25, positive_threshold=0.15, **kwargs):
        super().__init__(**kwargs)
        if not negative_threshold < positive_threshold:
            raise ValueError(f"need negative_threshold < positive_threshold, got {negative_threshold}, {positive_threshold}")
        self.negative_threshold = negative_threshold
        self.positive_threshold = positive_threshold

    def build(self, features_shape):
        dim = features_shape[-1]
        self.mean = self.add_weight(shape=(dim,), initializer="zeros", trainable=False, name="mean")
        self.std = self.add_weight(shape=(dim,), initializer="ones", trainable=False, name="std")

    def adapt(self, training_features):
        """Fits the standardisation to the training images' features
        ([N, F] array), in float64."""
        features = np.asarray(training_features, np.float64)
        if not self.built:
            self.build(features.shape)
        std = features.std(axis=0)
        self.mean.assign(features.mean(axis=0).astype(np.float32))
        self.std.assign(np.where(std > 0, std, 1.0).astype(np.float32))

    def call(self, features):
        z = (features - self.mean) / self.std
        ones = ops.ones_like(z)
        return ops.where(z > self.positive_threshold, ones, ops.where(z < self.negative_threshold, -ones, 0 * ones))

    def compute_output_shape(self, features_shape):
        return features_shape

    def get_config(self):
        return {
            **super().get_config(),
            "negative_threshold": self.negative_threshold,
            "positive_threshold": self.positive_threshold,
        }
