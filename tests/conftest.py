"""Fixtures shared by several test modules."""

import functools
import os
import shutil

import pytest

import train

# A few minutes of CPU at most for any of these runs. Validation on the
# first 100 dev images: what a test asks of a run is its test numbers, its
# checkpoint or its export, never that its selection saw the whole dev split.
TINY = [
    "--set", "model.word_dim=16", "--set", "model.embed_dim=32",
    "--set", "train.epochs=2", "--set", "train.batch_size=32",
    "--set", "train.max_train_images=160", "--set", "train.validate_every=7",
    "--set", "train.validate_max_images=100", "--set", "train.learning_rate=0.002",
]


@pytest.fixture(autouse=True)
def commands_without_kernel_variables(monkeypatch):
    """A recorded command names the variables of the environment that chose
    its kernels (ONEDNN_MAX_CPU_ISA=AVX2, ...: `common.records.command_line`);
    the tests' expected commands are those of an environment without them,
    so that the suite passes under a user's own cap too."""
    from common import machine, records

    environ = {name: value for name, value in os.environ.items() if name not in machine.KERNEL_VARIABLES}
    command_line = records.command_line
    monkeypatch.setattr(records, "command_line",
                        lambda *args, environ=environ, **kwargs: command_line(*args, environ=environ, **kwargs))


@pytest.fixture(scope="session")
def made_once(tmp_path_factory):
    """`made_once(name, make)`: the folder `name`, which `make(folder)`
    makes, once a test session. pytest-xdist's workers (docs/testing.md)
    share it: the first to ask makes it, holding a lock, while the others
    wait for it; a folder whose making failed is made again by the next to
    ask."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    root = base.parent if "PYTEST_XDIST_WORKER" in os.environ else base  # a worker's base is in the session's

    def made(name, make):
        folder, done = root / name, root / f"{name}.done"
        with FileLock(root / f"{name}.lock"):
            if not done.exists():
                shutil.rmtree(folder, ignore_errors=True)
                make(folder)
                done.touch()
        return folder

    return made


@pytest.fixture(scope="module")
def loaded_once():
    """`loaded_once(path)`: the SavedModel at `path` by `tf.saved_model.load`,
    loaded (and each function readied at its first call) once for the
    module's tests, none of which changes it: seconds for an export with
    its backbone."""
    import tensorflow as tf

    return functools.cache(lambda path: tf.saved_model.load(str(path)))


def _trained_once(made_once, name, argv, **finish):
    """The run `name` of `train.main(argv + --model-dir, **finish)`, made once a test session."""
    return made_once(name, lambda folder: _train(argv, folder, **finish))


def _train(argv, model_dir, **finish):
    assert train.main([*argv, "--model-dir", str(model_dir)], **finish) == 0


@pytest.fixture(scope="session")
def sample_data(tmp_path_factory):
    """A precomp "test" split of the 8 test images embedded as JPEGs
    (`data/flickr8k_images_sample/`): their features, captions and ids."""
    import numpy as np

    from tests.helpers import EMBEDDED_DATA, EMBEDDED_IMAGES

    root = tmp_path_factory.mktemp("sample_data")
    ids = EMBEDDED_DATA.joinpath("test_ids.txt").read_text().splitlines()[:8]
    assert sorted(ids) == sorted(p.name for p in EMBEDDED_IMAGES.glob("*.jpg"))
    np.save(root / "test_ims.npy", np.load(EMBEDDED_DATA / "test_ims.npy")[:8])
    captions = EMBEDDED_DATA.joinpath("test_caps.txt").read_text().splitlines()[:40]
    root.joinpath("test_caps.txt").write_text("\n".join(captions) + "\n")
    root.joinpath("test_ids.txt").write_text("\n".join(ids) + "\n")
    return root


@pytest.fixture(scope="session")
def unusual_ids(sample_data, tmp_path_factory):
    """The 8 sample images under ids with a folder (`pics/<file>.jpg`, as
    COCO's `val2014/...`) in a precomp folder, the same split as a
    collection (ids `pics/<file>`, no extension), and an images folder
    holding `pics/`."""
    from data import collections
    from tests.helpers import EMBEDDED_IMAGES, renamed_test_split

    root = tmp_path_factory.mktemp("unusual_ids")
    precomp, ids = renamed_test_split(sample_data, root / "precomp", lambda name: f"pics/{name}")
    images = root / "images"
    (images / "pics").mkdir(parents=True)
    for name in ids:
        (images / "pics" / name).write_bytes((EMBEDDED_IMAGES / name).read_bytes())
    collections.precomp_to_collections(precomp, root / "collections", splits=("test",))
    return {"precomp": precomp, "collections": root / "collections", "images": images, "ids": ids}


@pytest.fixture(scope="session")
def trained_bf16(made_once):
    """The tiny `gru` run trained under mixed bfloat16."""
    from tests.helpers import skip_where_bfloat16_crashes

    skip_where_bfloat16_crashes()
    return _trained_once(made_once, "gru-bf16", ["--model", "gru", "--preset", "quick", *TINY,
                                                 "--set", "runtime.mixed_precision=bf16"])


@pytest.fixture(scope="session")
def trained(made_once):
    """A tiny `gru` run of the quick preset (160 training images, 2 epochs)."""
    return _trained_once(made_once, "gru", ["--model", "gru", "--preset", "quick", *TINY])


@pytest.fixture(scope="session")
def trained_rcn(made_once):
    """A tiny `rcn` run of the quick preset, logging every 3 steps: 2
    capsules and 2 recursions (the preset's 4 and 4 quadruple the tracing
    of its training step and its export)."""
    return _trained_once(made_once, "rcn", ["--model", "rcn", "--preset", "quick", *TINY,
                                            "--set", "model.num_capsules=2", "--set", "model.recursions=2",
                                            "--set", "train.max_train_images=64", "--set", "train.epochs=1",
                                            "--set", "train.log_every=3"])


TINY_W2VV = [
    "--set", "model.gru_units=16", "--set", "model.hidden_units=[64]",
    "--set", "train.epochs=1", "--set", "train.max_train_images=160", "--set", "train.batch_size=40",
    "--set", "train.validate_max_images=100",
]


@pytest.fixture(scope="session")
def trained_w2vv(made_once):
    """A multi-scale Word2VisualVec run of the quick preset (GloVe-50),
    shrunk to 160 training images and one epoch."""
    return _trained_once(made_once, "w2vv", ["--model", "w2vv", "--preset", "quick", *TINY_W2VV])


TINY_MCNN = [
    "--set", "model.feature_maps=[8,8,8]", "--set", "model.hidden_units=[8]", "--set", "train.epochs=1",
    "--set", "train.max_train_images=100", "--set", "train.batch_size=50", "--set", "train.validate_max_images=50",
]


@pytest.fixture(scope="session")
def short_test_data(made_once):
    """The embedded data with a test split of its first 100 images only:
    for pairwise models, whose test evaluation scores every image-caption
    pair (5 million on the whole split). One folder for every worker: the
    runs trained on it record its path."""

    def make(root):
        import numpy as np

        from tests.helpers import EMBEDDED_DATA

        root.mkdir()
        for split in ("train", "dev"):
            for suffix in ("ims.npy", "caps.txt", "ids.txt"):
                (root / f"{split}_{suffix}").symlink_to(EMBEDDED_DATA / f"{split}_{suffix}")
        np.save(root / "test_ims.npy", np.load(EMBEDDED_DATA / "test_ims.npy")[:100])
        for suffix, lines in (("caps.txt", 500), ("ids.txt", 100)):
            kept = (EMBEDDED_DATA / f"test_{suffix}").read_text().splitlines()[:lines]
            (root / f"test_{suffix}").write_text("\n".join(kept) + "\n")

    return made_once("short_test_data", make)


@pytest.fixture(scope="session")
def trained_mcnn_members(made_once, short_test_data):
    """The four m-CNNs of the quick preset at tiny sizes: {variant: model
    dir}. `st` is tested on 100 images and exported; the others, members
    of the ensemble only, are their best checkpoints (no results.json, no
    SavedModel)."""
    variants = ("wd", "phs", "phl", "st")

    def make(root):
        for variant in variants:
            finished = variant == "st"
            _train(["--model", f"mcnn-{variant}", "--preset", "quick", "--data", str(short_test_data), *TINY_MCNN],
                   root / variant, evaluate_test=finished, export=finished)

    root = made_once("mcnn", make)
    return {variant: root / variant for variant in variants}


@pytest.fixture(scope="session")
def trained_mcnn_st(trained_mcnn_members):
    return trained_mcnn_members["st"]


@pytest.fixture(scope="session")
def trained_mcnn_ens(trained_mcnn_members, short_test_data, made_once):
    """m-CNN_ENS assembled by train.py from the four tiny members."""
    members = ",".join(str(trained_mcnn_members[v]) for v in ("wd", "phs", "phl", "st"))
    return _trained_once(made_once, "mcnn-ens", ["--model", "mcnn-ens", "--preset", "quick",
                                                 "--data", str(short_test_data), "--set", f"model.members={members}",
                                                 "--set", "train.validate_max_images=50"])


@pytest.fixture(scope="session")
def trained_fne(made_once):
    """A tiny `poe` run of the quick preset on the per-layer features
    through the Full-Network Embedding (`--image-features fne`)."""
    return _trained_once(made_once, "poe-fne", ["--model", "poe", "--preset", "quick", "--image-features", "fne",
                                                *TINY, "--set", "train.epochs=1"])


@pytest.fixture(scope="session")
def trained_ensemble(trained, trained_fv, trained_fne, made_once):
    """The zoo ensemble of three families on two kinds of features (`gru`
    and Fisher vectors on `ims`, an FNE pipeline on `stages`), its weights
    chosen on the first 200 dev images."""
    return _trained_once(made_once, "ensemble", ["--model", "ensemble",
                                                 "--set", f"model.members={trained},{trained_fv},{trained_fne}",
                                                 "--set", "train.validate_max_images=200"])


@pytest.fixture(scope="session")
def trained_fv(made_once):
    """An HGLMM Fisher-vector model of the quick preset (GloVe-50, ICA),
    with 4 components and 3 EM iterations, its CCA fitted on 300 training
    images and its ridge chosen on 100 dev images."""
    return _trained_once(made_once, "fv", ["--model", "fv-hglmm", "--preset", "quick",
                                           "--set", "model.num_components=4", "--set", "model.em_iterations=3",
                                           "--set", "model.cca_etas=[0.001,0.01]", "--set", "train.max_train_images=300",
                                           "--set", "train.validate_max_images=100"])


@pytest.fixture(scope="session")
def trained_rerank(trained, trained_mcnn_ens, short_test_data, made_once):
    """The two-stage run of the tiny `gru` (first stage) and the tiny m-CNN
    ensemble (second), k chosen on 50 dev images, tested on 100 images."""
    return _trained_once(made_once, "gru-mcnn-ens", ["--model", "rerank", "--data", str(short_test_data),
                                                     "--set", f"model.members={trained},{trained_mcnn_ens}",
                                                     "--set", "train.validate_max_images=50"])
