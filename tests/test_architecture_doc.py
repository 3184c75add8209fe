"""docs/ARCHITECTURE.md stays true of the tree: every module is named, the exit codes match (and README.md's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from livecam import errors

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "ARCHITECTURE.md"
PACKAGE = ROOT / "src" / "livecam"

pytestmark = pytest.mark.skipif(not DOC.is_file(), reason="docs/ARCHITECTURE.md is not in this checkout")


def test_every_module_is_described() -> None:
    text = DOC.read_text(encoding="utf-8")
    modules = sorted(p.name for p in PACKAGE.rglob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    missing = [name for name in modules if name not in text]
    assert not missing, f"modules missing from docs/ARCHITECTURE.md: {missing}"


def test_exit_codes_match_errors_module() -> None:
    text = DOC.read_text(encoding="utf-8")
    expected = (f"({errors.EXIT_USAGE} input, {errors.EXIT_MODEL} model, {errors.EXIT_PROVIDER} provider, "
                f"{errors.EXIT_INTERRUPTED} interrupted, {errors.EXIT_FAILURE} other")
    assert expected in " ".join(text.split())


def test_the_readme_says_which_missing_devices_are_input_errors() -> None:
    # `run` exits 2 for a camera, display or virtual camera missing at start (errors.py's entry
    # above): the README's exit codes named the first two only
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert (
        "2 bad usage or input (a camera, display or virtual camera `run` finds missing at start,"
        " or a camera that gives no frame, counts as input)"
    ) in readme
