"""`python -m tools.plot_training`: the figure in the format its name's
extension asks for; bad output names refused before any event file is read."""

import json
import logging
import os
import stat

import pytest
import tensorflow as tf

from tools import plot_training


def _write_run(model_dir, losses, dev_rsums):
    """A model directory with the TensorBoard scalars train.py writes:
    logs/train/ "loss" and "grad_norm_max", logs/dev/ "rsum"."""
    for kind, tags in (("train", {"loss": losses, "grad_norm_max": [2 * v for v in losses]}),
                       ("dev", {"rsum": dev_rsums})):
        writer = tf.summary.create_file_writer(str(model_dir / "logs" / kind))
        with writer.as_default():
            for tag, values in tags.items():
                for step, value in enumerate(values, start=1):
                    tf.summary.scalar(tag, value, step=10 * step)
        writer.close()
    return model_dir


@pytest.fixture
def runs(tmp_path):
    return [_write_run(tmp_path / "a", [3.0, 2.0, 1.5], [100.0, 150.0]),
            _write_run(tmp_path / "b", [4.0, 1.0], [120.0])]


# The first bytes of each format's files.
MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF", "svg": b"<?xml", "eps": b"%!PS-Adobe", "jpg": b"\xff\xd8\xff"}


@pytest.mark.parametrize("fmt", sorted(MAGIC))
def test_writes_the_format_of_the_extension(runs, tmp_path, capsys, fmt):
    out = tmp_path / f"figure.{fmt}"
    assert plot_training.main([str(runs[0]), str(runs[1]), "--out", str(out)]) == 0
    assert out.read_bytes().startswith(MAGIC[fmt])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", f"figure.{fmt}"]  # no partial or probe left
    series = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(s["run"], s["panel"], s["steps"], s["values"]) for s in series] == [
        (str(runs[0]), "loss", [10, 20, 30], [3.0, 2.0, 1.5]), (str(runs[1]), "loss", [10, 20], [4.0, 1.0]),
        (str(runs[0]), "grad_norm_max", [10, 20, 30], [6.0, 4.0, 3.0]),
        (str(runs[1]), "grad_norm_max", [10, 20], [8.0, 2.0]),
        (str(runs[0]), "dev:rsum", [10, 20], [100.0, 150.0]), (str(runs[1]), "dev:rsum", [10], [120.0])]


def test_reading_the_logs_leaves_out_tensorboards_info_lines(runs, caplog):
    # TensorBoard logs "No path found after <event file>" at INFO, the commands' log level.
    caplog.set_level(logging.INFO)
    assert plot_training.read_scalars(runs[0], "dev") == {"rsum": ([10, 20], [100.0, 150.0])}
    assert [record.getMessage() for record in caplog.records if record.name.startswith("tensorboard")] == []
    assert logging.getLogger("tensorboard").level == logging.NOTSET  # as it was


def test_an_upper_case_extension_is_its_format(runs, tmp_path, capsys):
    out = tmp_path / "figure.PDF"
    assert plot_training.main([str(runs[0]), "--out", str(out)]) == 0
    assert out.read_bytes().startswith(b"%PDF")


def _run_error(argv, capsys):
    assert plot_training.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    return err


# A run that does not exist: the output is refused before its logs are looked for.
@pytest.mark.parametrize("name, found", [("figure.xyz", "the extension '.xyz'"), ("figure", "no extension"),
                                         ("figure.pdf.", "no extension")])
def test_refuses_an_extension_matplotlib_cannot_write_before_reading_runs(tmp_path, capsys, name, found):
    out = tmp_path / name
    err = _run_error([str(tmp_path / "no-such-run"), "--out", str(out)], capsys)
    assert f"--out {out}: {found} names no format matplotlib writes" in err
    assert ".pdf" in err and ".png" in err and "no-such-run" not in err
    assert not out.exists()


def test_refuses_a_missing_directory_before_reading_runs(tmp_path, capsys):
    out = tmp_path / "missing" / "figure.pdf"
    err = _run_error([str(tmp_path / "no-such-run"), "--out", str(out)], capsys)
    assert f"--out {out}: the directory {out.parent} does not exist" in err


def _unwritable_directory(tmp_path):
    directory = tmp_path / "read-only"
    directory.mkdir()
    directory.chmod(stat.S_IRUSR | stat.S_IXUSR)
    if not os.access(directory, os.W_OK):
        return directory
    # As root, permissions do not stop writes; a sysfs directory does.
    for candidate in ("/sys", "/sys/kernel"):
        try:
            open(os.path.join(candidate, ".plot_training-probe"), "w").close()
        except OSError:
            return candidate
    pytest.skip("no unwritable directory to test with")


def test_refuses_an_unwritable_directory_before_reading_runs(tmp_path, capsys):
    directory = _unwritable_directory(tmp_path)
    out = os.path.join(directory, "figure.png")
    err = _run_error([str(tmp_path / "no-such-run"), "--out", out], capsys)
    assert f"--out {out}: the directory {directory} is not writable" in err


def test_a_label_for_each_run(runs, tmp_path, capsys):
    err = _run_error([str(runs[0]), str(runs[1]), "--label", "a", "--out", str(tmp_path / "figure.png")], capsys)
    assert "--label given 1 time for 2 runs" in err


def test_the_python_api_checks_the_name_first_too(tmp_path):
    from common.errors import InputError

    with pytest.raises(InputError, match="names no format matplotlib writes"):
        plot_training.plot([str(tmp_path / "no-such-run")], ["x"], ["loss"], tmp_path / "figure.doc")
