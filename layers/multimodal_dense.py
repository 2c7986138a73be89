"""m-CNN_st's joint layer: the first MLP layer on [image || sentence]."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class MultimodalDense(keras.layers.Layer):
    """The hidden layer of m-CNN_st's MLP (Ma et al. 2015, eqs. 2 and 9) on
    the joint representation nu_JR = [nu_im || nu_st]:

        h = ReLU(w_h [nu_im || nu_st] + b_h) = ReLU(W_im nu_im + (W_st nu_st + b_h))

    factorised, like `MultimodalConv1D`, into an image part (once per image)
    and a text part (once per sentence), so a pair costs an add and a ReLU.

    Args:
      units: hidden size (400).

    `text_part`, `image_part` and `combine` need the weights: call the
    layer once or `build` it first. They compute in the layer's compute
    dtype (bfloat16 under mixed precision) by casting the weights
    themselves: Keras' autocast only reaches `call`.

    Call args (the literal layer on aligned pairs):
      text: float [B, C] sentence vectors nu_st.
      image: float [B, d] image vectors nu_im.

    Returns:
      float [B, units].
    """

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, text_shape, image_shape=None):
        self.text_kernel = self.add_weight(
            name="text_kernel", shape=(text_shape[-1], self.units), initializer="glorot_uniform"
        )
        self.image_kernel = self.add_weight(
            name="image_kernel", shape=(image_shape[-1], self.units), initializer="glorot_uniform"
        )
        self.bias = self.add_weight(name="bias", shape=(self.units,), initializer="zeros")

    def text_part(self, text):
        """float [B, C] -> float [B, units]."""
        kernel, bias = (ops.cast(w, self.compute_dtype) for w in (self.text_kernel, self.bias))
        return ops.matmul(text, kernel) + bias

    def image_part(self, image):
        """float [N, d] -> float [N, units]."""
        return ops.matmul(image, ops.cast(self.image_kernel, self.compute_dtype))

    @staticmethod
    def combine(text, image):
        """ReLU(text + image), broadcasting (e.g. [n, 1, H] + [1, m, H])."""
        return ops.relu(text + image)

    def call(self, text, image):
        return self.combine(self.text_part(text), self.image_part(image))

    def compute_output_shape(self, text_shape, image_shape=None):
        return (text_shape[0], self.units)

    def get_config(self):
        return {**super().get_config(), "units": self.units}
