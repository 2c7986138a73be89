"""Projection of one view into a fitted CCA space, for cosine scoring."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class CanonicalProjection(keras.layers.Layer):
    """One view's side of a CCA (Klein et al. 2015, Sec. 5; the authors'
    code for the scaling and normalisation):

        v = ((x - mean) W) * r**power,  then v / ||v||

    so that the cosine of two projections is the similarity in the
    r-weighted CCA space. The weights are fitted in closed form
    (`models.fisher_vectors.cca`) and set with `set_projection`; none is
    trainable.

    Args:
      input_dim: the view's size.
      output_dim: the number of canonical directions.
      power: the exponent of the correlations' scaling (1, the authors'
        code; 0 = none).

    Call args:
      inputs: float [B, input_dim].

    Returns:
      float [B, output_dim], unit rows (zero rows stay zero).
    """

    def __init__(self, input_dim, output_dim, power=1.0, **kwargs):
        super().__init__(**kwargs)
        self.input_dim = input_dim
        self.output_dim = output_dim
        self.power = power
        self.mean = self.add_weight(name="mean", shape=(input_dim,), trainable=False, initializer="zeros")
        self.directions = self.add_weight(
            name="directions", shape=(input_dim, output_dim), trainable=False, initializer="glorot_uniform"
        )
        self.correlations = self.add_weight(name="correlations", shape=(output_dim,), trainable=False, initializer="ones")

    def set_projection(self, mean, directions, correlations):
        self.mean.assign(ops.convert_to_tensor(mean, "float32"))
        self.directions.assign(ops.convert_to_tensor(directions, "float32"))
        self.correlations.assign(ops.convert_to_tensor(correlations, "float32"))

    def call(self, inputs):
        projected = ops.matmul(inputs - self.mean, self.directions) * self.correlations**self.power
        return projected / ops.maximum(ops.norm(projected, axis=-1, keepdims=True), 1e-12)

    def compute_output_shape(self, inputs_shape):
        return (inputs_shape[0], self.output_dim)

    def get_config(self):
        return {**super().get_config(), "input_dim": self.input_dim, "output_dim": self.output_dim,
                "power": self.power}
