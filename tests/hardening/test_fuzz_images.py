"""Fuzzed image files as the target and as the --source of `livecam image`: success or exit 2
with one line, never a traceback or a partial file (the rules are in tests/hardening/fuzz.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import pytest
from click.testing import CliRunner

from livecam.cli import cli
from tests.conftest import run_measured
from tests.hardening import fuzz

CHUNKS, PER_CHUNK = 4, 40  # 160 mutated files per role; with the special cases over 350 runs in all


@pytest.fixture
def good_face(faces_dir: Path, tmp_path: Path) -> Path:
    path = tmp_path / "good.png"
    cv2.imwrite(str(path), fuzz.small_face(faces_dir, "biden.jpg", 200))
    return path


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LIVECAM_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("LIVECAM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LIVECAM_OFFLINE", "1")


def run_all(cases: list[fuzz.Case], role: str, good: Path, work: Path) -> list[fuzz.Outcome]:
    runner = CliRunner()
    return [fuzz.run_case(runner, cli, case, role, good, work) for case in cases]


def report(outcomes: list[fuzz.Outcome]) -> str:
    bad = [o for o in outcomes if o.problem]
    return "\n".join(f"{o.role} {o.case}: {o.problem}" for o in bad[:20]) + f"\n({len(bad)} of {len(outcomes)} bad)"


@pytest.mark.parametrize("chunk", range(CHUNKS))
@pytest.mark.parametrize("role", ["target", "source"])
def test_mutated_images(role: str, chunk: int, faces_dir: Path, good_face: Path, offline: None,
                        tmp_path: Path) -> None:
    seeds = fuzz.seed_cases(faces_dir)
    cases = list(fuzz.mutated_cases(seeds, PER_CHUNK, seed=100 * (role == "source") + chunk))
    outcomes = run_all(cases, role, good_face, tmp_path / "work")
    assert not any(o.problem for o in outcomes), report(outcomes)
    codes = {o.exit_code for o in outcomes}
    assert codes == {0, 2}, codes  # each chunk holds both files that still work and files that do not


@pytest.mark.parametrize("role", ["target", "source"])
def test_special_images(role: str, faces_dir: Path, good_face: Path, offline: None, tmp_path: Path) -> None:
    cases = fuzz.special_cases(faces_dir)
    outcomes = {o.case: o for o in run_all(cases, role, good_face, tmp_path / "work")}
    assert not any(o.problem for o in outcomes.values()), report(list(outcomes.values()))
    # Files that hold a usable picture work in either role...
    for name in ("sixteen-bit-png", "sixteen-bit-tiff", "gray-png", "rgba-webp", "bmp", "cmyk-jpeg", "png-named-jpg"):
        assert outcomes[name].exit_code == 0, (name, outcomes[name].stderr)
    # ...empty, fake and bomb files fail with a message that says what is wrong.
    for name, words in (("zero-size-jpg", "empty"), ("text-named-jpg", "not an image"),
                        ("bomb-png", "pixels"), ("bomb-jpeg", "pixels"), ("bomb-webp", "pixels"),
                        ("bomb-png-real-idat", "pixels"), ("bomb-bmp", "pixels")):
        assert outcomes[name].exit_code == 2 and words in outcomes[name].stderr, (name, outcomes[name].stderr)


def test_decompression_bomb_is_refused_before_allocating(faces_dir: Path, good_face: Path, tmp_path: Path,
                                                           isolated_env: dict[str, str]) -> None:
    """A PNG declaring 100000x100000 pixels (30 GB decoded) is refused from its header: the whole
    process never grows past a few hundred MB (measured by the kernel, not estimated)."""
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(fuzz.png_bomb(fuzz.HUGE, fuzz.HUGE))
    for args in (["image", str(bomb), str(tmp_path / "o.png"), "-s", str(good_face)],
                 ["image", str(good_face), str(tmp_path / "o.png"), "-s", str(bomb)]):
        code, stderr, peak = run_measured(args, isolated_env)  # the kernel's peak of the run alone
        assert code == 2, stderr
        assert "100000x100000" in stderr and "Traceback" not in stderr, stderr
        assert peak < 1.5e9  # the bomb needs 30 GB
        assert not (tmp_path / "o.png").exists()


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KB: Linux")
