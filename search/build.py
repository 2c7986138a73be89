"""Building an index in one process, resumable (`search.store` has the
format).

Images are encoded in batches through the export's `encode_image_bytes`
(a file that cannot be read or decoded is skipped and listed), captions
through its `encode_text`; every `shard_items` encodings are written as a
shard at once. A build started again with the same model and source
resumes from the shards of `INDEX.partial/`; one with another model or
source starts that folder anew.
"""

import shutil
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

from common import progress
from common.errors import InputError, error_reason
from search import approximate, store
from search.collection import file_digest, list_images, read_captions
from search.model import encode_image_files

CAPTION_BATCH = 256
CAPTIONS_FILE = "captions.txt"  # an index of captions keeps them, one a line


class Source:
    """What is indexed: the items' ids, how to encode a batch of them, and
    the manifest's description of the source."""

    def __init__(self, model, images=None, captions=None):
        if (images is None) == (captions is None):
            raise InputError("give a folder of images or a caption file to index, not both")
        if images is not None:
            self.kind, self.unit, self.folder = "images", "image", Path(images)
            self.ids = list_images(images)
            model.check_takes_images("--images")
            self.description = {"kind": "images", "source": str(self.folder.resolve()), "source_digest": None}
            self.side = "image"
        else:
            self.kind, self.unit = "captions", "caption"
            self.captions = read_captions(captions)
            # A caption is named by its line (1-based): the same caption may be on two lines.
            self.ids = [str(line) for line in range(1, len(self.captions) + 1)]
            self.description = {"kind": "captions", "source": str(Path(captions).resolve()),
                                "source_digest": file_digest(captions)}
            self.side = "text"
        # The index's encodings (a two-stage export's first stage's; the second's go beside the shards).
        self.encoding_shape = model.loaded.similarity.input_signature[0 if self.side == "image" else 1].shape[1:]
        # What `encode` gives: those, or both stages' side by side.
        self.encoded_shape = (self.encoding_shape if model.rerank_k is None else
                              [self.encoding_shape[0] + model.rerank_encoding_shape(self.side)[0]])
        self.model = model

    def shard_arrays(self, encodings):
        """{"encodings", "rerank_encodings"} of a shard, from encodings as
        `encode` gives them (a two-stage export's: both stages' side by side)."""
        if self.model.rerank_k is None:
            return {"encodings": encodings, "rerank_encodings": None}
        first, second = self.model.split(encodings, self.side)
        return {"encodings": first, "rerank_encodings": second}

    def encode(self, ids):
        """(encodings [n, ...] or None, encoded ids, [(skipped id, reason)])."""
        if self.kind == "images":
            return encode_image_files(self.model, ids, lambda name: (self.folder / name).read_bytes())
        texts = [self.captions[int(line) - 1] for line in ids]
        try:
            return self.model.encode_text_batch(texts), list(ids), []
        except tf.errors.InvalidArgumentError:
            for line, text in zip(ids, texts):
                try:
                    self.model.encode_text_batch([text])
                except tf.errors.InvalidArgumentError as error:
                    raise InputError(f"{self.description['source']}: line {line}: the model refuses the caption "
                                     f"({error_reason(error)})") from None
            raise

    def batch_size(self):
        return store.IMAGE_BATCH if self.kind == "images" else CAPTION_BATCH


def manifest_for(model, source):
    """The manifest of an unfinished index of `source` by `model`."""
    description = {"path": str(Path(model.path).resolve()), "fingerprint": model.fingerprint,
                   "joint_space": model.joint_space, "metric": model.metric,
                   "encoding_shape": list(source.encoding_shape)}
    if model.rerank_k is not None:
        description.update(rerank_k=model.rerank_k,
                           rerank_encoding_shape=list(model.rerank_encoding_shape(source.side)))
    return {**source.description, "complete": False, "model": description}


def start_or_resume(staging, manifest, source):
    """Prepares `staging` for the build described by `manifest`: resumes an
    unfinished build of the same model and source (returning the ids its
    shards hold, encoded or skipped, and the number of shards), or starts a
    new one."""
    if staging.is_dir():
        previous = store.read_manifest(staging)
        previous.pop("format")
        if previous == manifest:
            done, shards = set(), store.shard_files(staging)
            for path in shards:
                arrays = store.read_shard(path, ("ids", "skipped"))
                done.update(arrays["ids"].tolist())
                done.update(arrays["skipped"].tolist())
            print(f"resuming {staging}: {len(done)} of {len(source.ids)} {source.kind} done", file=sys.stderr)
            return done, len(shards)
        print(f"{staging}: an unfinished index of another model or source; starting it anew", file=sys.stderr)
        shutil.rmtree(staging)
    staging.mkdir()
    if source.kind == "captions":
        (staging / CAPTIONS_FILE).write_text("".join(f"{caption}\n" for caption in source.captions), encoding="utf-8")
    store.write_manifest(staging, manifest)
    return set(), 0


def build_index(model, out, images=None, captions=None, approximate_choice="auto", shard_items=store.SHARD_ITEMS):
    """Encodes a folder of images or a caption file into the index `out`
    (see the module docstring); returns the finished manifest.

    Everything is checked before the first encoding: `out` (new, empty, or
    an index), the source (a folder holding JPEG/PNG images; a caption
    file without empty lines), the model (the image signature for
    images) and `approximate_choice` (`search.approximate.wanted`).
    """
    out = Path(out)
    store.check_out(out)
    source = Source(model, images, captions)
    approximate.wanted(approximate_choice, len(source.ids), model.metric)
    staging = store.staging_dir(out)
    manifest = manifest_for(model, source)
    done, shard_number = start_or_resume(staging, manifest, source)
    todo = [item for item in source.ids if item not in done]
    pending = {"encodings": [], "ids": [], "skipped": []}
    kept = len(done)

    def write_shards(final):
        nonlocal shard_number, kept
        while len(pending["ids"]) >= shard_items or (final and (pending["ids"] or pending["skipped"])):
            encodings = np.concatenate([np.zeros((0, *source.encoded_shape), np.float32), *pending["encodings"]])
            ids = pending["ids"]
            arrays = source.shard_arrays(encodings[:shard_items])
            store.write_shard(staging / f"shard-{shard_number:06d}.npz", arrays["encodings"], ids[:shard_items],
                              pending["skipped"], arrays["rerank_encodings"])
            kept += len(ids[:shard_items]) + len(pending["skipped"])
            shard_number += 1
            pending.update(encodings=[encodings[shard_items:]], ids=ids[shard_items:], skipped=[])

    try:
        with progress.bar(total=len(source.ids), initial=len(done), desc=f"indexing {source.kind}",
                          unit=source.unit) as bar:
            for start in range(0, len(todo), source.batch_size()):
                batch = todo[start : start + source.batch_size()]
                encodings, encoded, skipped = source.encode(batch)
                if encodings is not None:
                    pending["encodings"].append(encodings)
                pending["ids"] += encoded
                pending["skipped"] += skipped
                write_shards(final=False)
                bar.update(len(batch))
        write_shards(final=True)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"{kept} of {len(source.ids)} {source.kind} are kept in {staging}; "
                                "the same command resumes from there") from None
    return store.finish(staging, out, lambda paths, items, finished: approximate.build_for_index(
        paths, items, finished, approximate_choice))


def report(out, manifest):
    """Prints what a build made: the skipped files (stderr), then one line
    (stdout)."""
    for path, reason in manifest["skipped"]:
        print(f"skipped {path}: {reason}", file=sys.stderr)
    approximate_index = " and an approximate index" if manifest["approximate"] else ""
    two_stages = (f", re-ranked by the second stage in lists of {manifest['model']['rerank_k']}"
                  if manifest["model"].get("rerank_k") is not None else "")
    skipped = f", {len(manifest['skipped'])} skipped (listed in index.json)" if manifest["skipped"] else ""
    print(f"{out}: {manifest['items']} {manifest['kind']}{approximate_index}{two_stages}{skipped}")
