"""livecam ships py.typed, so its type hints are a promise: mypy, with the [tool.mypy] settings of
pyproject.toml, must find nothing in src/livecam."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                       reason="mypy is not installed (pip install -e '.[dev]')"),
    pytest.mark.skipif(not (ROOT / "pyproject.toml").is_file() or not (ROOT / "src" / "livecam").is_dir(),
                       reason="not a source checkout (pyproject.toml and src/livecam needed)"),
]


def test_package_type_checks() -> None:
    # The default cache (.mypy_cache, git-ignored) keeps reruns under a second; cold takes seconds.
    result = subprocess.run([sys.executable, "-m", "mypy", "src/livecam"], cwd=ROOT,
                            capture_output=True, text=True, timeout=280)
    assert result.returncode == 0, f"mypy found problems:\n{result.stdout}{result.stderr}"
