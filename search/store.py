"""The index format: a directory of encoding shards and a manifest.

    INDEX/index.json        the manifest (below)
    INDEX/shard-*.npz       encodings float32 [n, ...], ids [n] (an image's
                            path under the folder, or a caption), skipped [m]
                            and skip_reasons [m] (files that could not be read)
    INDEX/shard-*.rerank.npy  a two-stage index's second-stage encodings
                            float32 [n, ...] of the shard's items

`index.json` holds the format's name, `kind` ("images" or "captions"),
`source` (the folder or the caption file, absolute) and, for captions, its
SHA-256 (`source_digest`), `model` (the SavedModel's path, its fingerprint,
`joint_space`, `metric` and the encoding shape; for a two-stage export,
also `rerank_k` and `rerank_encoding_shape`), `complete`, and, once
complete, `shards` (file, items, bytes, in the order of the index's rows;
`rerank_bytes`, the size of its `.rerank.npy`, in a two-stage index),
`items`, `skipped` ([path, reason] pairs) and `approximate` (null, or the
approximate index's file and settings, `search.approximate`).

An index is built in `INDEX.partial/` beside it: each shard is written
(atomically) as soon as it is encoded, so a killed build resumes from the
shards there; the finished directory then replaces INDEX in two renames,
so an existing index is never left half-overwritten. The shards of one
build hold every item at most once, in any partition: the single-process
build writes them in the folder's sorted order, the Beam pipeline
(`search.beam`) by a hash of the ids.
"""

import json
import zipfile
from pathlib import Path

import numpy as np

from common.errors import InputError
from common.files import atomic_write, check_output_folder, replace_directory, write_json_atomically

FORMAT = "zoo-search-index/1"
SHARD_ITEMS = 4096  # encodings per shard (16 MB of 1024-d float32)
IMAGE_BATCH = 32  # images per call of the export's image signature
MANIFEST = "index.json"
SHARD_PATTERN = "shard-*.npz"


def staging_dir(out):
    """Where an index is built before it replaces `out`."""
    out = Path(out)
    return out.with_name(out.name + ".partial")


def check_out(out, argument="--out"):
    """Fails, before any work, unless `out` can receive an index: it is new,
    an empty folder, or an index (replaced once the new one is complete)."""
    out = Path(out)
    if not out.parent.is_dir():
        raise InputError(f"{argument} {out}: the folder {out.parent} does not exist")
    check_output_folder(out, argument, MANIFEST, "an index")
    staging = staging_dir(out)
    if staging.exists() and not (staging / MANIFEST).is_file():
        raise InputError(f"{argument} {out}: {staging} exists and is not an unfinished index; move it away")


def read_manifest(folder):
    """The manifest of an index folder (complete or not); `InputError` when
    there is none or it is not one of this format."""
    path = Path(folder) / MANIFEST
    if not Path(folder).is_dir():
        raise InputError(f"{folder}: no such index (not a folder)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{folder}: not an index (no {MANIFEST})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{path}: unreadable index manifest ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise InputError(f"{path}: not a manifest of this index format ({FORMAT})")
    return manifest


def write_manifest(folder, manifest):
    write_json_atomically(Path(folder) / MANIFEST, json.dumps({"format": FORMAT, **manifest}, indent=1) + "\n")


def rerank_file(shard):
    """The file of a two-stage index's second-stage encodings of the items
    of `shard` (`shard-NNNNNN.rerank.npy`): a plain .npy, so a query reads
    the rows it re-ranks from a memory map."""
    return Path(shard).with_suffix(".rerank.npy")


def write_shard(path, encodings, ids, skipped=(), rerank_encodings=None):
    """Writes one shard atomically: `encodings` float32 [n, ...] of the
    items `ids`, and the `skipped` (file, reason) pairs; for a two-stage
    index, first the second stage's `rerank_encodings` [n, ...] (`rerank_file`)."""
    skipped = list(skipped)
    if rerank_encodings is not None:
        atomic_write(rerank_file(path), lambda file: np.save(file, np.asarray(rerank_encodings, np.float32)))

    def write(file):
        np.savez(file, encodings=np.asarray(encodings, np.float32), ids=np.array(ids, dtype=str),
                 skipped=np.array([name for name, _ in skipped], dtype=str),
                 skip_reasons=np.array([reason for _, reason in skipped], dtype=str))

    atomic_write(path, write)


def read_shard(path, members=("encodings", "ids", "skipped", "skip_reasons")):
    """The members of a shard, as a dict of arrays; `InputError` naming the
    shard when it is missing, truncated or corrupt (the zip's CRCs)."""
    try:
        with np.load(path, allow_pickle=False) as shard:
            arrays = {name: shard[name] for name in members}
    except FileNotFoundError:
        raise InputError(f"{path}: shard missing") from None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        raise InputError(f"{path}: damaged shard ({str(error).splitlines()[0] if str(error) else type(error).__name__}); "
                         "build the index again") from None
    if "encodings" in arrays and "ids" in arrays and len(arrays["encodings"]) != len(arrays["ids"]):
        raise InputError(f"{path}: damaged shard ({len(arrays['encodings'])} encodings for {len(arrays['ids'])} ids)")
    return arrays


def _check_rerank_file(shard, items):
    """The size of a shard's second-stage encodings (`rerank_file`), which
    must hold a row for each of its `items`."""
    path = rerank_file(shard)
    try:
        rows = len(np.load(path, mmap_mode="r"))
    except FileNotFoundError:
        raise InputError(f"{path}: missing (the second stage's encodings of {shard.name})") from None
    except (OSError, ValueError) as error:
        raise InputError(f"{path}: damaged ({error}); build the index again") from None
    if rows != items:
        raise InputError(f"{path}: {rows} encodings for the {items} items of {shard.name}; build the index again")
    return path.stat().st_size


def shard_files(folder):
    return sorted(Path(folder).glob(SHARD_PATTERN))


def finish(staging, out, approximate):
    """Completes the index built in `staging`: its shards checked and
    listed in the manifest (an id in two shards is an error), the
    approximate index built (`approximate(shard_paths, items, manifest)` ->
    its manifest entry or None), then `staging` replaces `out`."""
    staging, out = Path(staging), Path(out)
    manifest = read_manifest(staging)
    shards, skipped, seen = [], [], set()
    for path in shard_files(staging):
        arrays = read_shard(path, ("ids", "skipped", "skip_reasons"))
        duplicated = seen.intersection(arrays["ids"].tolist())
        if duplicated:
            raise InputError(f"{path}: holds {sorted(duplicated)[0]!r}, which another shard holds too")
        seen.update(arrays["ids"].tolist())
        skipped += [[str(name), str(reason)] for name, reason in zip(arrays["skipped"], arrays["skip_reasons"])]
        shards.append({"file": path.name, "items": len(arrays["ids"]), "bytes": path.stat().st_size})
        if manifest["model"].get("rerank_k") is not None:
            shards[-1]["rerank_bytes"] = _check_rerank_file(path, len(arrays["ids"]))
    if not seen:
        raise InputError(f"{out}: no item could be encoded ({len(skipped)} skipped, e.g. {skipped[0][0]}: "
                         f"{skipped[0][1]})" if skipped else f"{out}: nothing to index")
    manifest.update(complete=True, shards=shards, items=len(seen), skipped=sorted(skipped))
    manifest["approximate"] = approximate([staging / shard["file"] for shard in shards], len(seen), manifest)
    manifest.pop("format")
    write_manifest(staging, manifest)
    replace_directory(staging, out)
    return manifest
