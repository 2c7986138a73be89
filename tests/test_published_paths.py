"""What the repository publishes (README.md, docs/, results/ and the data
folders' READMEs) names no folder of the machine it was made on: records
keep paths relative to the repository, or `<dir>/NAME` for a path outside
it (`common.records.portable_path`)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEXT_SUFFIXES = {".md", ".json", ".toml", ".txt"}
# A machine's absolute path: a POSIX one below a usual root of home,
# temporary or mounted folders (not after a letter, a dot or a slash:
# "shared/data/", "../tmp/" and "$HOME/x" are not), or a Windows drive. A
# server's conventional folders in a deployment example (/srv, /models)
# name no developer's machine.
MACHINE_PATH = re.compile(r"(?<![\w.~$/:-])/(?:work|home|tmp|root|Users|mnt|var|scratch|data)/[^\s\"'`)]*"
                          r"|\b[A-Za-z]:\\[^\s\"'`)]*")


def published_files(root):
    """The text files of what `root` publishes."""
    files = [root / "README.md", *(root / "data").glob("*/README.md")]
    for folder in ("docs", "results"):
        files += [path for path in (root / folder).rglob("*") if path.suffix in TEXT_SUFFIXES]
    return sorted(path for path in files if path.is_file())


def machine_paths(root):
    """"FILE:LINE: PATH" of every machine path in what `root` publishes."""
    found = []
    for path in published_files(root):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found += [f"{path.relative_to(root)}:{number}: {match}" for match in MACHINE_PATH.findall(line)]
    return found


@pytest.mark.parametrize("text", [
    "python train.py --model-dir /work/main/runs/rcn11/gru-s0",
    "--set model.word_vectors=/home/me/glove/glove.6B.50d.txt",
    '"export": "/tmp/bench36/rerank-gru-mcnn/saved_model"',
    "model.members=runs/a,/mnt/disk/runs/b",
    "`/Users/me/zoo/runs`",
    r"C:\Users\me\zoo\runs",
])
def test_a_machine_path_is_found(text):
    assert MACHINE_PATH.search(text)


@pytest.mark.parametrize("text", [
    "--model-dir runs/rcn11/gru-s0",
    "--set 'model.word_vectors=<dir>/glove.6B.50d.txt'",
    "a `shared/data/` folder beside the repository",
    "--data ../tmp/f8k",
    "$HOME/VisualSearch/word2vec/flickr/vec500flickr30m",
    '"devices": ["/device:CPU:0"]',
    "--data /path/to/f8k_vgg19",
    "https://github.com/fartashf/vsepp/tree/master/data",
    "--model_base_path=/srv/models/gru-quick/saved_model",  # a server's folder in a deployment example
])
def test_a_portable_path_is_not_a_machine_path(text):
    assert not MACHINE_PATH.search(text)


def test_a_path_planted_in_any_published_folder_is_reported(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "results" / "bench").mkdir(parents=True)
    (tmp_path / "data" / "f8k").mkdir(parents=True)
    (tmp_path / "README.md").write_text("python train.py --model-dir /home/me/runs/x\n")
    (tmp_path / "docs" / "page.md").write_text("text\nsee /tmp/x/y.png\n")
    (tmp_path / "results" / "bench" / "r.json").write_text('{"command": "python -m tools.bench --out /work/x"}\n')
    (tmp_path / "data" / "f8k" / "README.md").write_text("features in /mnt/features/\n")
    (tmp_path / "docs" / "figure.png").write_bytes(b"\x89PNG /tmp/x/ \xff")  # not text: not read
    assert machine_paths(tmp_path) == [
        "README.md:1: /home/me/runs/x",
        "data/f8k/README.md:1: /mnt/features/",
        "docs/page.md:2: /tmp/x/y.png",
        'results/bench/r.json:1: /work/x',
    ]


def test_nothing_published_names_a_folder_of_a_machine():
    assert published_files(ROOT)  # the scan reads the repository's own files
    assert machine_paths(ROOT) == []
