"""`livecam models convert`: a GFPGANv1Clean checkpoint becomes an ONNX file that computes the
same function. Uses a tiny configuration of the real architecture (same key names and layout as
GFPGANv1.4.pth's `params_ema`); skipped where torch (the `convert` extra) is not installed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli

torch = pytest.importorskip("torch", reason="torch is not installed (optional `livecam[convert]` extra)")

from livecam.models.gfpgan_arch import GfpganConfig, GFPGANv1Clean, config_from_state_dict  # noqa: E402

# The real 512 px layout, 32 times narrower (2..16 channels), with a 16-wide style: fast to run.
TINY = GfpganConfig(out_size=512, num_style_feat=16, num_mlp=2, channel_multiplier=2, narrow=1 / 32)


def _tiny_checkpoint(path: Path, key: str = "params_ema") -> GFPGANv1Clean:
    torch.manual_seed(1)
    model = GFPGANv1Clean(TINY).eval()
    with torch.no_grad():  # non-zero noise strengths and biases, so every parameter matters
        for name, p in model.named_parameters():
            if p.dim() <= 1 or name.endswith(".bias"):
                p.add_(torch.randn_like(p) * 0.05)
    torch.save({key: model.state_dict()}, str(path))
    return model


def test_real_key_names_and_config_round_trip(tmp_path: Path) -> None:
    model = _tiny_checkpoint(tmp_path / "tiny.pth")
    state = model.state_dict()
    # Key names of the released GFPGANv1.4.pth params_ema.
    for key in ("conv_body_first.weight", "conv_body_down.0.skip.weight", "final_linear.weight",
                "condition_scale.0.2.weight", "condition_shift.3.0.bias", "toRGB.0.weight",
                "stylegan_decoder.constant_input.weight", "stylegan_decoder.style_mlp.1.weight",
                "stylegan_decoder.style_conv1.modulated_conv.modulation.weight",
                "stylegan_decoder.style_convs.0.weight", "stylegan_decoder.to_rgbs.3.bias",
                "stylegan_decoder.noises.noise0"):
        assert key in state, key
    assert config_from_state_dict(state) == TINY
    with torch.device("meta"):  # shapes only: no 86 M random numbers to draw
        full = GFPGANv1Clean()
    assert config_from_state_dict(full.state_dict()) == GfpganConfig()


def test_full_size_architecture_matches_gfpgan_v14_shapes() -> None:
    with torch.device("meta"):
        model = GFPGANv1Clean(GfpganConfig())
    used = sum(p.numel() for p in model.parameters()) - sum(
        p.numel() for m in (model.toRGB, model.stylegan_decoder.style_mlp) for p in m.parameters())
    assert abs(used / 84.0e6 - 1) < 0.02  # "about 84 M parameters used at inference"
    state = model.state_dict()
    assert tuple(state["final_linear.weight"].shape) == (16 * 512, 256 * 16)
    assert tuple(state["stylegan_decoder.style_convs.13.modulated_conv.weight"].shape) == (1, 64, 64, 3, 3)


def test_convert_cli_exports_the_same_function(tmp_path: Path, isolated_env: dict[str, str]) -> None:
    import onnxruntime as ort

    model = _tiny_checkpoint(tmp_path / "GFPGANv1.4.pth")
    out = tmp_path / "gfpgan.onnx"
    result = run_cli(["models", "convert", str(tmp_path / "GFPGANv1.4.pth"), "-o", str(out)], env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert out.is_file() and str(out) in result.stdout
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    (inp,), (outp,) = sess.get_inputs(), sess.get_outputs()
    assert (inp.name, inp.shape, inp.type) == ("input", [1, 3, 512, 512], "tensor(float)")
    assert (outp.name, outp.shape) == ("output", [1, 3, 512, 512])
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 512, 512)).astype(np.float32)
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    got = sess.run(None, {"input": x})[0]
    assert np.abs(want).max() > 0.01
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-3)
    leftovers = [p.name for p in tmp_path.iterdir() if ".part" in p.name]
    assert not leftovers


def test_convert_rejects_a_non_gfpgan_checkpoint(tmp_path: Path, isolated_env: dict[str, str]) -> None:
    ckpt = tmp_path / "other.pth"
    torch.save({"params_ema": torch.nn.Linear(4, 4).state_dict()}, str(ckpt))
    out = tmp_path / "out.onnx"
    result = run_cli(["models", "convert", str(ckpt), "-o", str(out)], env=isolated_env)
    assert result.returncode == 2
    assert "not a GFPGANv1Clean" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == [ckpt]


def test_convert_rejects_a_file_that_is_no_checkpoint(tmp_path: Path) -> None:
    from livecam.errors import InputError
    from livecam.models.convert import convert_gfpgan

    ckpt = tmp_path / "GFPGANv1.4.pth"
    ckpt.write_bytes(b"<html>not found</html>")  # what a failed download often leaves
    with pytest.raises(InputError, match="not a readable PyTorch checkpoint") as info:
        convert_gfpgan(ckpt, tmp_path / "o.onnx")
    assert info.value.exit_code == 2 and "\n" not in info.value.message
    assert not (tmp_path / "o.onnx").exists()


def test_convert_of_a_foreign_pickle_is_one_clean_line(tmp_path: Path, recwarn: pytest.WarningsRecorder) -> None:
    import pickle

    from livecam.errors import InputError
    from livecam.models.convert import convert_gfpgan

    ckpt = tmp_path / "GFPGANv1.4.pth"
    ckpt.write_bytes(pickle.dumps({"model": object}, protocol=4))  # torch warns about protocol 4 on stderr
    with pytest.raises(InputError) as info:
        convert_gfpgan(ckpt, tmp_path / "o.onnx")
    message = info.value.message
    assert message.endswith("give the GFPGANv1.4.pth file (-v shows torch's error)")
    assert "PyTorch 2.6" not in message and "weights_only" not in message  # torch's paragraph stays out
    assert not [w for w in recwarn if "pickle" in str(w.message)]
