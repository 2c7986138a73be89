"""The image features a run reads: their kind, their files in a data
folder, their width and how they were made (`ImageFeatures`).

The kinds a user names (`train.py` and `evaluate.py --image-features`,
config.json's `data.image_features`, an export's `image_features`):

- `fc`: one CNN layer's features, the file `{split}_ims.npy` of a precomp
  folder;
- `fne`: every layer's, the raw material of a Full-Network Embedding,
  `{split}_stages.npy`;
- `a+b`: the features `a` and `b` of each item side by side (an ensemble
  of members of both kinds reads `fc+fne`; a video's visual and audio
  features).

Any other name is read as it is: a collection's own features
(`<split>/FeatureData/<name>/`, e.g. a video collection's) or a precomp
file `{split}_<name>.npy`.

Before this record the file stems `ims` and `stages` were the names in
config.json, exports and evaluate.py's option; `kind_name` still reads
them (`option_kind` adds a note on the command line).
"""

import dataclasses
import logging

from common.errors import InputError

log = logging.getLogger(__name__)

# The file stems (`{split}_<stem>.npy` in a precomp folder) of one CNN
# layer's features and of every layer's.
ONE_LAYER, EVERY_LAYER = "ims", "stages"
# Each kind a user names and its file stem. `fne` names the Full-Network
# Embedding's raw material, which any model may read: this line is the one
# place of the shared floors that spells it (tests/test_floors.py).
KINDS = {"fc": ONE_LAYER, "fne": EVERY_LAYER}
_OLD_NAMES = {stem: kind for kind, stem in KINDS.items()}


def kind_name(name):
    """The kind of `name`: itself, or for the old names `ims` and `stages`
    (alone or in an `a+b`) their kinds; `InputError` for an empty part."""
    parts = name.split("+")
    if not all(parts):
        raise InputError(f"image features {name!r}: expected a kind or kinds joined by '+'")
    return "+".join(_OLD_NAMES.get(part, part) for part in parts)


def file_stems(kind):
    """The file stem (or collection feature name) of each part of `kind`, in order."""
    return tuple(KINDS.get(part, part) for part in kind_name(kind).split("+"))


@dataclasses.dataclass(frozen=True)
class ImageFeatures:
    """The image features a model reads, from its training data on.

    Attributes:
      kind: `fc`, `fne`, kinds joined by '+', or a collection's own name
        (the module docstring).
      width: the features' size (their columns; the parts' side by side).
      provenance: how they were made, the training folder's provenance.json
        (`data.provenance`), or None where it has none.
    """

    kind: str
    width: int
    provenance: dict | None = None

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, record, path):
        """The record of a config.json's `image_features` section; `path`
        names the file in errors."""
        if not isinstance(record, dict) or set(record) != {"kind", "width", "provenance"}:
            raise InputError(f"{path}: image_features must hold kind, width and provenance; got {record!r}")
        kind, width, provenance = record["kind"], record["width"], record["provenance"]
        if not isinstance(kind, str) or type(width) is not int or width < 1 or not isinstance(provenance, (dict, type(None))):
            raise InputError(f"{path}: image_features: a kind name, a positive width and a provenance or null; "
                             f"got {record!r}")
        try:
            return cls(kind_name(kind), width, provenance)
        except InputError as error:
            raise InputError(f"{path}: {error}") from None


def option_kind(name, option="--image-features"):
    """The kind `name`, given to the command-line `option`, stands for
    (`kind_name`), with a one-line note when it is an old name."""
    kind = kind_name(name)
    if kind != name:
        log.warning("%s %s is the old name of %s: write %s %s", option, name, kind, option, kind)
    return kind
