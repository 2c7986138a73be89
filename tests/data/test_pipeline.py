import numpy as np
import pytest
import tensorflow as tf

from data import pipeline


def tokenized(n_images=10, captions_per_image=5, seed=0):
    rng = np.random.default_rng(seed)
    n = n_images * captions_per_image
    lengths = rng.integers(1, 9, size=n).astype(np.int32)
    token_ids = np.zeros((n, 8), np.int32)
    for row, length in enumerate(lengths):
        token_ids[row, :length] = rng.integers(2, 50, size=length)
    return pipeline.TokenizedSplit(
        images=rng.normal(size=(n_images, 4)).astype(np.float32),
        token_ids=token_ids,
        lengths=lengths,
        caption_image=np.repeat(np.arange(n_images), captions_per_image),
    )


def test_all_captions_sees_every_caption_once_per_epoch_in_full_batches():
    data = tokenized()
    batches = pipeline.epoch_order(data, "all_captions", batch_size=8, seed=0, epoch=0)
    assert batches.shape == (6, 8)
    assert len(np.unique(batches)) == 48
    again = pipeline.epoch_order(data, "all_captions", batch_size=8, seed=0, epoch=0)
    np.testing.assert_array_equal(batches, again)
    other_epoch = pipeline.epoch_order(data, "all_captions", batch_size=8, seed=0, epoch=1)
    assert not np.array_equal(batches, other_epoch)


def test_one_caption_per_image_never_repeats_an_image_and_varies_the_caption():
    data = tokenized(n_images=40)
    chosen = []
    for epoch in range(5):
        batches = pipeline.epoch_order(data, "one_caption_per_image", batch_size=10, seed=3, epoch=epoch)
        images = data.caption_image[batches.ravel()]
        assert sorted(images) == list(range(40))
        chosen.append(batches.ravel()[np.argsort(images)])
    assert len({tuple(c) for c in chosen}) == 5


def test_bucketing_keeps_the_epoch_content_and_groups_lengths():
    data = tokenized(n_images=200)
    plain = pipeline.epoch_order(data, "all_captions", 10, seed=0, epoch=0)
    bucketed = pipeline.epoch_order(data, "all_captions", 10, seed=0, epoch=0, bucket_by_length=True)
    assert sorted(plain.ravel()) == sorted(bucketed.ravel())
    spread = lambda b: np.mean([np.ptp(data.lengths[row]) for row in b])
    assert spread(bucketed) < spread(plain) / 2


def test_dataset_gathers_features_and_trims_padding():
    data = tokenized()
    batches = pipeline.epoch_order(data, "all_captions", 8, seed=0, epoch=0)
    for batch, indices in zip(pipeline.training_dataset(data, batches), batches):
        width = data.lengths[indices].max()
        np.testing.assert_array_equal(batch["token_ids"], data.token_ids[indices, :width])
        np.testing.assert_array_equal(batch["image_index"], data.caption_image[indices])
        np.testing.assert_array_equal(batch["image_features"], data.images[data.caption_image[indices]])


def test_the_training_dataset_is_not_autotuned():
    # Deleting an autotuned dataset's iterator (each epoch's end) waits for tf.data's tuning thread to wake: up
    # to a minute after a validation, during which a Ctrl-C waited too.
    data = tokenized()
    dataset = pipeline.training_dataset(data, pipeline.epoch_order(data, "all_captions", 8, seed=0, epoch=0))
    assert dataset.options().autotune.enabled is False


@pytest.mark.parametrize("sampling", ["all_captions", "one_caption_per_image"])
def test_a_training_pair_is_a_caption_and_its_own_image_from_the_files(sampling):
    # The path training takes (the split as train.py reads it, tokenised, ordered, gathered) against the files
    # read here by hand: caption line j of train_caps.txt belongs to image row j // 5 of train_ims.npy
    # (data/f8k_precomp/README.md).
    from data import splits
    from data.vocabulary import Vocabulary
    from layers.text_vectorizer import TextVectorizer
    from tests.helpers import EMBEDDED_DATA

    images = np.load(EMBEDDED_DATA / "train_ims.npy")[:400].astype(np.float32)
    lines = (EMBEDDED_DATA / "train_caps.txt").read_text(encoding="utf-8").splitlines()[:2000]
    split = splits.load_split(EMBEDDED_DATA, "train").first_images(400)
    vectorizer = TextVectorizer(Vocabulary.build(lines).tokens)
    data = pipeline.tokenize_split(split, vectorizer)
    batches = pipeline.epoch_order(data, sampling, batch_size=64, seed=1, epoch=2)
    for batch, indices in zip(pipeline.training_dataset(data, batches[:3]), batches[:3]):
        expected_ids = vectorizer(tf.constant([lines[j] for j in indices])).numpy()
        width = batch["token_ids"].shape[1]
        np.testing.assert_array_equal(batch["token_ids"].numpy(), expected_ids[:, :width])
        np.testing.assert_array_equal(batch["image_features"].numpy(), images[indices // 5])
        np.testing.assert_array_equal(batch["image_index"].numpy(), indices // 5)


# Items of an MSVD-style collection and their caption counts: one-caption
# items, odd counts and one above five, so no fixed count per item (such as
# Flickr8k's five, `j // 5`) maps a caption line to its item.
UNEVEN_CAPTIONS = {"vid3": 1, "vid10": 3, "vid7": 7, "vid1": 2, "vid22": 5, "vid4": 1, "vid9": 4, "vid15": 9,
                   "vid2": 1, "vid30": 7}


def uneven_collection(root):
    """Writes collection "train" in the bigfile layout by hand (no zoo
    writer): items with UNEVEN_CAPTIONS captions, the caption lines of
    different items interleaved at random, feature rows in another random
    order. Returns (the caption lines' items and texts in file order, each
    item's feature row)."""
    rng = np.random.default_rng(5)
    features = {item: rng.normal(size=6).astype(np.float32) for item in UNEVEN_CAPTIONS}
    captions = [(item, f"{item} caption {k} " + " ".join(rng.choice(["dog", "red", "runs", "a", "cat"], size=k + 1)))
                for item, count in UNEVEN_CAPTIONS.items() for k in range(count)]
    captions = [captions[k] for k in rng.permutation(len(captions))]
    rows = list(rng.permutation(list(UNEVEN_CAPTIONS)))
    feature_dir = root / "train" / "FeatureData" / "feat"
    feature_dir.mkdir(parents=True)
    (feature_dir / "shape.txt").write_text(f"{len(rows)} 6")
    (feature_dir / "id.txt").write_text(" ".join(rows))
    (feature_dir / "feature.bin").write_bytes(np.stack([features[item] for item in rows]).astype("<f4").tobytes())
    text_dir = root / "train" / "TextData"
    text_dir.mkdir(parents=True)
    counts = {}
    lines = []
    for item, caption in captions:
        counts[item] = counts.get(item, -1) + 1
        lines.append(f"{item}#enc#{counts[item]} {caption}\n")
    (text_dir / "train.caption.txt").write_text("".join(lines))
    return captions, features


@pytest.mark.parametrize("sampling", ["all_captions", "one_caption_per_image"])
def test_a_training_pair_is_a_caption_and_its_own_item_when_items_have_uneven_caption_counts(tmp_path, sampling):
    # The path training takes (engine.training: splits.load_split, tokenize_split, epoch_order, training_dataset)
    # on a collection whose items have 1 to 9 captions: each pair's features are its caption's item's row, and its
    # image index that item's place in the order of first captions (data/collections.py's convention).
    from data import splits
    from data.vocabulary import Vocabulary
    from layers.text_vectorizer import TextVectorizer

    captions, features = uneven_collection(tmp_path)
    split = splits.load_split(tmp_path, "train", "feat")
    first_seen = list(dict.fromkeys(item for item, _ in captions))
    vectorizer = TextVectorizer(Vocabulary.build([text for _, text in captions]).tokens)
    data = pipeline.tokenize_split(split, vectorizer)
    batches = pipeline.epoch_order(data, sampling, batch_size=5, seed=3, epoch=1)
    assert batches.size == (len(captions) if sampling == "all_captions" else len(UNEVEN_CAPTIONS))
    if sampling == "one_caption_per_image":
        assert sorted(captions[j][0] for j in batches.ravel()) == sorted(UNEVEN_CAPTIONS)
    for batch, indices in zip(pipeline.training_dataset(data, batches), batches, strict=True):
        items = [captions[j][0] for j in indices]
        expected_ids = vectorizer(tf.constant([captions[j][1] for j in indices])).numpy()
        np.testing.assert_array_equal(batch["token_ids"].numpy(), expected_ids)
        np.testing.assert_array_equal(batch["image_features"].numpy(), np.stack([features[item] for item in items]))
        np.testing.assert_array_equal(batch["image_index"].numpy(), [first_seen.index(item) for item in items])
