"""The indexing step as an Apache Beam pipeline (needs
requirements-beam.txt; `search.beam` is its command line).

    image paths -> RunInference(the export's encode_image_bytes, batched)
                -> (shard number, result) by a hash of the path
                -> GroupByKey -> one shard file per group (`search.store`)

Reading and decoding happen inside the model handler's `run_inference`
(`search.model.encode_image_files`, as the single-process build does):
a file that cannot be read or decoded is skipped and listed, not fatal.
A shard holds every path whose hash falls in its group, sorted, so a
retried bundle rewrites the same file with the same content.
"""

import zlib
from pathlib import Path

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystems import FileSystems
from apache_beam.ml.inference.base import ModelHandler, PredictionResult, RunInference
from apache_beam.options.pipeline_options import PipelineOptions

from search import store
from search.model import SearchModel, encode_image_files


class ImageBytesHandler(ModelHandler):
    """RunInference's model: the SavedModel's image signature on batches of
    image paths (relative to `folder`); each result is an encoding, or the
    reason the file was skipped (a string)."""

    def __init__(self, saved_model, folder, batch_size):
        super().__init__(min_batch_size=1, max_batch_size=batch_size)
        self.saved_model = str(saved_model)
        self.folder = str(folder)

    def load_model(self):
        return SearchModel(self.saved_model)

    def run_inference(self, batch, model, inference_args=None):
        encodings, encoded, skipped = encode_image_files(model, list(batch), self._read)
        results = {name: encoding for name, encoding in zip(encoded, encodings if encoded else [])}
        results.update(skipped)
        return [PredictionResult(name, results[name]) for name in batch]

    def _read(self, name):
        with FileSystems.open(FileSystems.join(self.folder, name)) as file:
            return file.read()


def shard_of(name, shards):
    """The shard a path goes to: a hash of it that is the same in every
    process (Python's `hash` of a string is not)."""
    return zlib.crc32(name.encode("utf-8")) % shards


def write_group(group, staging, encoding_shape):
    """Writes a group (shard number, PredictionResults) as that shard, sorted by path."""
    number, results = group
    results = sorted(results, key=lambda result: result.example)
    encoded = [result for result in results if not isinstance(result.inference, str)]
    encodings = (np.stack([result.inference for result in encoded]) if encoded
                 else np.zeros((0, *encoding_shape), np.float32))
    store.write_shard(Path(staging) / f"shard-{number:06d}.npz", encodings, [result.example for result in encoded],
                      [(result.example, result.inference) for result in results if isinstance(result.inference, str)])


def run_pipeline(saved_model, folder, ids, staging, encoding_shape, shard_items, batch_size, pipeline_args):
    """Encodes the images `ids` (paths under `folder`) into shards in
    `staging` with the Beam runner `pipeline_args` choose."""
    shards = max(1, -(-len(ids) // shard_items))
    handler = ImageBytesHandler(saved_model, folder, batch_size)
    with beam.Pipeline(options=PipelineOptions(pipeline_args)) as pipeline:
        _ = (pipeline
             | "image paths" >> beam.Create(ids)
             | "encode" >> RunInference(handler)
             | "by shard" >> beam.Map(lambda result: (shard_of(result.example, shards), result))
             | "group" >> beam.GroupByKey()
             | "write shards" >> beam.Map(write_group, staging=str(staging), encoding_shape=encoding_shape))
