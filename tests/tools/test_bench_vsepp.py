import pytest

from tools import bench_vsepp

TINY = ["--set", "model.word_dim=8", "--set", "model.embed_dim=16", "--steps", "2", "--warmup", "1"]


def test_vsepp_comparison_needs_a_vse_model(tmp_path, capsys):
    assert bench_vsepp.main([str(tmp_path), "--model", "w2vv"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --model w2vv: VSE++ trains a VSE model (a models.vse.VSEConfig); w2vv's config is W2VVConfig"
    )


def test_vsepp_comparison_needs_pytorch_and_a_clone_of_vsepp(tmp_path, capsys):
    assert bench_vsepp.main([str(tmp_path), "--model", "gru", *TINY]) == 2
    error = capsys.readouterr().err.strip()
    # Without PyTorch, that; with it, the missing clone.
    assert error in ("error: VSE++ needs PyTorch: pip install torch (a CPU build will do)",
                     f"error: {tmp_path / 'model.py'}: not found (VSEPP_CLONE is a clone of github.com/fartashf/vsepp)")


def test_vsepp_comparison_takes_one_clone(capsys):
    with pytest.raises(SystemExit):
        bench_vsepp.main(["--model", "gru"])
    assert "VSEPP_CLONE" in capsys.readouterr().err
