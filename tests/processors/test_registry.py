"""The processor registry: the CLI's choices and the engine come from the modules in
livecam.processors, so adding a processor is adding one module."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from livecam.processors import registry

ROOT = Path(__file__).resolve().parents[2]

FAKE_MODULE = '''
"""A processor that exists only in this test: inverts every face box."""
from livecam.processors.base import usable
from livecam.processors.registry import ProcessorSpec


class FaceInverter:
    name = "face_inverter"

    def prepare(self, sources):
        pass

    def process(self, packet):
        for face in packet.faces:
            if usable(face):
                x1, y1, x2, y2 = (int(v) for v in face.bbox)
                packet.image[y1:y2, x1:x2] = 255 - packet.image[y1:y2, x1:x2]
        return packet


PROCESSOR = ProcessorSpec(name=FaceInverter.name, role="enhancer", build=lambda ctx: FaceInverter(),
                          model=lambda ctx: "no model")
'''

# Adds the folder holding the fake module to the processors package, as if it had been added
# to src/livecam/processors/, then runs the CLI.
RUNNER = '''
import sys
import livecam.processors
livecam.processors.__path__.append(sys.argv[1])
from livecam.cli import main
sys.argv = ["livecam", *sys.argv[2:]]
main()
'''


def _livecam(plugin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", RUNNER, str(plugin_dir), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=240,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "src")})


def test_the_real_processors_are_registered_swapper_first() -> None:
    assert registry.names()[:2] == ("face_swapper", "face_enhancer")
    assert registry.default_names() == ("face_swapper",)
    assert registry.swaps(["face_enhancer", "face_swapper"]) and not registry.swaps(["face_enhancer"])
    assert registry.with_role(["face_swapper", "face_enhancer", "not_registered"], "enhancer") == ("face_enhancer",)


def test_an_added_processor_module_reaches_the_cli_and_the_engine(tmp_path: Path, faces_dir: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "face_inverter.py").write_text(textwrap.dedent(FAKE_MODULE))
    help_text = _livecam(plugins, "image", "--help")
    assert help_text.returncode == 0 and "face_inverter" in help_text.stdout, help_text.stdout + help_text.stderr

    photo = cv2.imread(str(faces_dir / "obama.jpg"))
    target, out = tmp_path / "in.png", tmp_path / "out.png"
    cv2.imwrite(str(target), photo)
    # No --source: the new processor is not a swapper, so none is needed; no other edit made it known.
    run = _livecam(plugins, "image", str(target), str(out), "--frame-processor", "face_inverter", "--no-label", "--no-watermark", "--no-c2pa",
                   "--execution-provider", "cpu")
    assert run.returncode == 0, run.stderr
    assert "enhancer no model" in run.stderr  # Engine.describe() names it by its registered role
    result = cv2.imread(str(out)).astype(np.int16)
    changed = np.abs(result - photo.astype(np.int16)).max(axis=2) > 0
    ys, xs = np.nonzero(changed)
    assert changed.mean() > 0.01  # a face-sized region was inverted...
    h, w = changed.shape
    assert not changed[:, :5].any() and not changed[:, w - 5:].any()  # ...not the whole frame
    assert 0 < ys.min() and ys.max() < h - 1 and xs.size > 0


def test_an_unknown_processor_is_refused_by_the_cli(tmp_path: Path) -> None:
    run = _livecam(tmp_path, "image", "a.png", "b.png", "--frame-processor", "face_inverter")
    assert run.returncode == 2 and "face_inverter" in run.stderr


def _warnings(frame_processors: tuple[str, ...], swap_model: str | None, swap: dict[str, Any] | None = None,
              enhance: dict[str, Any] | None = None) -> list[str]:
    from livecam.settings import EnhanceSettings, ProcessingSettings, SwapSettings

    settings = ProcessingSettings(sources=(), frame_processors=frame_processors, swap=SwapSettings(**(swap or {})),
                                  enhance=EnhanceSettings(**(enhance or {})))
    return registry.unused_option_warnings(settings, swap_model)


def test_options_a_run_does_not_use_are_each_said_once() -> None:
    swap_only, both = ("face_swapper",), ("face_swapper", "face_enhancer")
    assert _warnings(swap_only, "inswapper_128") == []
    assert _warnings(both, "inswapper_128", enhance={"model": "codeformer", "weight": 0.3}) == []
    # the enhancer's options without the enhancer
    [line] = _warnings(swap_only, "inswapper_128", enhance={"blend": 0.7, "precision": "fp16"})
    assert "--enhancer-blend and --enhancer-precision are for the face enhancer" in line
    assert "add face_enhancer to --frame-processor" in line
    # the swapper's options in an enhance-only run
    [line] = _warnings(("face_enhancer",), None, swap={"mouth_mask": 10, "color_match": False})
    assert line.startswith("warning: --mouth-mask and --no-color-match are for the face swapper")
    # the neural swapper's paste options with the mesh swapper (not --blend nor --mouth-mask: it uses them)
    [line] = _warnings(swap_only, "mesh", swap={"face_mask_blur": 0.9, "face_mask_padding": (5.0, 0.0, 0.0, 0.0),
                                               "pixel_boost": 256, "blend": 0.5, "mouth_mask": 0})
    assert "--pixel-boost, --face-mask-blur and --face-mask-padding are for the neural swapper" in line
    assert "--blend" not in line and "--mouth-mask" not in line
    # areas and regions shape only their own mask type
    lines = _warnings(swap_only, "inswapper_128", swap={"face_mask": ("box", "area"), "face_mask_areas": ("mouth",),
                                                        "face_mask_regions": ("skin",)})
    assert lines == ["warning: --face-mask-regions shapes the region mask, which this run does not use "
                     "(add --face-mask region)"]
    # the padding shrinks the box only: with area or region masks alone it did nothing, unsaid
    lines = _warnings(swap_only, "inswapper_128",
                      swap={"face_mask": ("area",), "face_mask_padding": (20.0, 0.0, 0.0, 0.0)})
    assert lines == ["warning: --face-mask-padding shapes the box mask, which this run does not use "
                     "(add --face-mask box)"]
    # CodeFormer's fidelity on another enhancer
    [line] = _warnings(both, "inswapper_128", enhance={"weight": 0.5})
    assert "--enhancer-weight is CodeFormer's fidelity; gfpgan_1.4 has no such input" in line
