"""Training input pipelines (`tf.data`) over pre-tokenised captions.

Captions are turned into token ids once, by the model's own `TextVectorizer`
(the in-graph tokenizer that the SavedModel also uses), so training and
serving tokenise identically. Each epoch's order is a pure function of
(seed, epoch): a resumed run rebuilds the same order and skips the batches
it has already trained on.

Two samplings:
- "all_captions": every caption of every image once per epoch (VSE++).
- "one_caption_per_image": every image once per epoch with one of its
  captions drawn at random (Vilalta et al. 2018, Sec. 4.3), so a batch never
  holds two captions of the same image.

The last incomplete batch of an epoch is dropped: every step then sees a
full global batch (hardest negatives come from the batch, and the batch must
split evenly over replicas); the epoch's shuffle decides which pairs wait
for the next epoch.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from common.errors import InputError
from data.tokenizer import TOKENIZERS

# Bucketing sorts this many batches' worth of captions by length at a time.
BUCKET_POOL_BATCHES = 50


@dataclasses.dataclass(frozen=True)
class TokenizedSplit:
    """A split with its captions already turned into token ids.

    Attributes:
      images: float32 [n_images, F].
      token_ids: int32 [n_captions, max_len], 0-padded.
      lengths: int32 [n_captions], tokens per caption.
      caption_image: int64 [n_captions].
    """

    images: np.ndarray
    token_ids: np.ndarray
    lengths: np.ndarray
    caption_image: np.ndarray


def check_captions(split, tokenizer, max_tokens, batch_size=8192):
    """Fails, naming the captions file, unless every caption of a
    `readers.RetrievalSplit` has between 1 and `max_tokens` tokens under
    `tokenizer` (what the models' `TextVectorizer` accepts): checked before
    any work, not when the split's turn comes."""
    captions = split.captions
    lengths = np.concatenate([
        TOKENIZERS[tokenizer](tf.constant(captions[start:start + batch_size])).row_lengths().numpy()
        for start in range(0, len(captions), batch_size)
    ])
    bad = np.flatnonzero((lengths < 1) | (lengths > max_tokens))
    if bad.size:
        line = int(bad[0])
        raise InputError(
            f"{split.captions_file}: caption {line + 1} has {lengths[line]} tokens ({tokenizer} tokenizer); "
            f"a caption needs 1 to {max_tokens} ({captions[line][:60]!r})"
        )


def tokenize_split(split, vectorizer, batch_size=4096):
    """Runs `vectorizer` over all captions of a `RetrievalSplit`."""
    blocks = [
        vectorizer(tf.constant(split.captions[start : start + batch_size])).numpy()
        for start in range(0, len(split.captions), batch_size)
    ]
    width = max(block.shape[1] for block in blocks)
    token_ids = np.concatenate(
        [np.pad(block, ((0, 0), (0, width - block.shape[1]))) for block in blocks]
    ).astype(np.int32)
    return TokenizedSplit(
        images=split.images,
        token_ids=token_ids,
        lengths=(token_ids != 0).sum(axis=1).astype(np.int32),
        caption_image=np.asarray(split.caption_image, dtype=np.int64),
    )


def epoch_order(data, sampling, batch_size, seed, epoch, bucket_by_length=False):
    """Caption indices of one epoch, batch after batch (full batches only).

    Returns:
      int64 [steps, batch_size].
    """
    rng = np.random.default_rng([seed, epoch])
    if sampling == "all_captions":
        order = rng.permutation(len(data.caption_image))
    elif sampling == "one_caption_per_image":
        order = _one_caption_per_image(data.caption_image, rng)
    else:
        raise ValueError(f"unknown sampling {sampling!r}")
    steps = len(order) // batch_size
    if steps == 0:
        raise ValueError(
            f"{len(order)} training pairs per epoch are fewer than one batch of {batch_size}"
        )
    order = order[: steps * batch_size]
    if bucket_by_length:
        order = _bucket(order, data.lengths, batch_size, rng)
    return order.reshape(steps, batch_size)


def _one_caption_per_image(caption_image, rng):
    images = rng.permutation(int(caption_image.max()) + 1)
    # Random keys sorted within each image pick one caption uniformly.
    keys = rng.random(len(caption_image))
    by_image = np.lexsort((keys, caption_image))
    first = np.searchsorted(caption_image[by_image], images)
    return by_image[first]


def _bucket(order, lengths, batch_size, rng):
    """Sorts pools of batches by caption length, then shuffles the batches."""
    pool = batch_size * BUCKET_POOL_BATCHES
    batches = []
    for start in range(0, len(order), pool):
        chunk = order[start : start + pool]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches.extend(chunk.reshape(-1, batch_size))
    return np.concatenate([batches[i] for i in rng.permutation(len(batches))])


def training_dataset(data, batches):
    """A dataset of training batches for the given caption-index batches.

    Each element is a dict: "image_features" float32 [B, F], "token_ids"
    int32 [B, L] cut to the longest caption of the batch, "image_index"
    int64 [B].
    """
    images = tf.constant(data.images)
    token_ids = tf.constant(data.token_ids)
    lengths = tf.constant(data.lengths)
    caption_image = tf.constant(data.caption_image)

    def gather(indices):
        image_index = tf.gather(caption_image, indices)
        width = tf.reduce_max(tf.gather(lengths, indices))
        return {
            "image_features": tf.gather(images, image_index),
            "token_ids": tf.gather(token_ids, indices)[:, :width],
            "image_index": image_index,
        }

    # Not autotuned: deleting an autotuned dataset's iterator waits for tf.data's tuning thread to wake, up to a
    # minute (40 s measured) when the loop paused for a validation, and a Ctrl-C waited with it. A batch is a few
    # gathers, hidden behind the step by one prefetched batch.
    options = tf.data.Options()
    options.autotune.enabled = False
    return tf.data.Dataset.from_tensor_slices(batches).map(gather).prefetch(1).with_options(options)
