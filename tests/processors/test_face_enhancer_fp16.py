"""`livecam image` with --enhancer-precision on stand-ins: fp16 on the CPU restores the face as
fp32 does (pixels changed inside the face only, within a grey level or two of the fp32 run),
with the inswapper and with the mesh swapper; auto stays fp32 on the CPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli
from tests.processors.test_face_enhancer_cli import EXACT, cli_setup
from tests.processors.test_face_enhancer_cli import _image as cli_image
from tests.processors.test_face_enhancer_cli import _regions
from tests.standins.gfpgan import build_gfpgan

ENHANCE = ["--frame-processor", "face_swapper", "face_enhancer", "--enhancer-blend", "1", "--execution-provider", "cpu"]


@pytest.fixture
def setup(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> dict:
    return cli_setup(tmp_path, faces_dir, isolated_env, lambda models: build_gfpgan(models / "gfpgan_1.4.onnx", kind="random"))


def _image(setup: dict, out_name: str, *extra: str) -> np.ndarray:
    return cli_image(setup, out_name, *extra, swap_model=None)  # each test names its swapper


@pytest.mark.parametrize("swap_model", ["inswapper_128", "mesh"])
def test_fp16_enhancer_on_the_cpu_restores_the_face_as_fp32_does(setup: dict, swap_model: str) -> None:
    swap = ["--swap-model", swap_model]
    swapped = _image(setup, "swapped.png", *swap)
    fp32 = _image(setup, "fp32.png", *swap, *ENHANCE, "--enhancer-precision", "fp32")
    assert "enhancer gfpgan_1.4;" in setup["stderr"] or setup["stderr"].rstrip().endswith("enhancer gfpgan_1.4")
    half = _image(setup, "fp16.png", *swap, *ENHANCE, "--enhancer-precision", "fp16")
    assert "enhancer gfpgan_1.4 fp16" in setup["stderr"]
    assert list((setup["models"] / "fp16").glob("gfpgan_1.4.*.onnx"))
    face, far = _regions(swapped)
    assert (np.abs(half - swapped)[face].max(axis=2) > 4).mean() > 0.3  # the enhancer ran
    assert np.array_equal(half[far], swapped[far])
    assert np.abs(half - fp32).max() <= 2  # fp16 rounding, not another picture


def test_auto_is_fp32_on_the_cpu(setup: dict) -> None:
    _image(setup, "auto.png", "--swap-model", "inswapper_128", *ENHANCE)
    assert "enhancer gfpgan_1.4" in setup["stderr"] and "fp16" not in setup["stderr"]
    assert not (setup["models"] / "fp16").exists()  # nothing converted


def test_a_refused_copy_is_one_line_and_exit_code(setup: dict) -> None:
    """A refusal recorded by an earlier run (a copy with NaN in its output) stops the run with
    the record's one line, naming the model and the fix."""
    import json

    from livecam.models import fp16
    from livecam.models.download import sha256_file

    fp32 = setup["models"] / "gfpgan_1.4.onnx"
    copy, record = fp16.cached_paths(setup["models"], "gfpgan_1.4", sha256_file(fp32))
    record.parent.mkdir()
    drift = {"nonfinite": 12, "p99_levels": 0.0, "max_levels": 0.0, "mean_levels": 0.0}
    record.write_text(json.dumps({"format": fp16.FORMAT, "model": "gfpgan_1.4", "converter": fp16.converter_name(),
                                  "max_drift_levels": fp16.MAX_DRIFT_LEVELS, "drift": drift, "bytes": 0}))
    out = setup["tmp"] / "refused.png"
    result = run_cli(["--unverified-models", "image", str(setup["target"]), str(out), "-s", str(setup["source"]),
                      "--swap-model", "inswapper_128", *EXACT, *ENHANCE, "--enhancer-precision", "fp16"],
                     env=setup["env"])
    assert result.returncode != 0 and not out.exists()
    lines = [line for line in result.stderr.splitlines() if "fp16" in line]
    assert len(lines) == 1 and "gfpgan_1.4" in lines[0] and "NaN/Inf" in lines[0]
    assert lines[0].rstrip().endswith("use --enhancer-precision fp32") and "Traceback" not in result.stderr
    assert not copy.exists()


def test_a_damaged_copy_names_the_command_that_makes_it_again_and_that_command_does(setup: dict) -> None:
    """A copy damaged after its check (its size kept, so the cache still takes it) fails to load;
    the line's repair was the fp32 model's download, which leaves the copy as it is. Its command,
    run as given (no --unverified-models: the catalog holds the stand-ins' sizes), replaces it."""
    import re
    import shlex
    from dataclasses import replace

    from livecam.models.catalog import CATALOG
    from tests.commands.test_models import run_patched
    from tests.models.helpers import catalog_to_json, sha

    models = setup["models"]
    standins = {name: (models / CATALOG[name].file_name).read_bytes() for name in ("w600k_r50", "inswapper_128", "gfpgan_1.4")}
    specs = [replace(spec, size=len(standins[name]), sha256=None if spec.sha256 is None else sha(standins[name]))
             if name in standins else spec for name, spec in CATALOG.items()]
    catalog = setup["tmp"] / "catalog.json"
    catalog.write_text(catalog_to_json(specs), encoding="utf-8")
    out = setup["tmp"] / "out.png"
    run = ["image", str(setup["target"]), str(out), "-s", str(setup["source"]), "--swap-model", "inswapper_128",
           *EXACT, *ENHANCE, "--enhancer-precision", "fp16"]

    def image() -> tuple[int, str]:
        out.unlink(missing_ok=True)
        result = run_patched(catalog, run, setup["env"])
        return result.returncode, result.stderr

    code, stderr = image()
    assert code == 0, stderr
    [copy] = (models / "fp16").glob("gfpgan_1.4.*.onnx")
    good = copy.read_bytes()
    copy.write_bytes(good[:len(good) // 2] + bytes(len(good) - len(good) // 2))  # the end never written

    code, stderr = image()
    assert code != 0 and not out.exists() and "Traceback" not in stderr
    [line] = [line for line in stderr.splitlines() if "cannot be loaded" in line]
    assert str(copy) in line, line
    repair = re.search(r"run `livecam ([^`]+)`, which replaces it$", line.rstrip())
    assert repair is not None and repair.group(1) == "models convert --fp16 gfpgan_1.4", line

    result = run_patched(catalog, shlex.split(repair.group(1)), setup["env"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(copy) and copy.read_bytes() == good
    code, stderr = image()
    assert code == 0 and "enhancer gfpgan_1.4 fp16" in stderr, stderr
