"""What a user installs: the wheel holds every file livecam reads at runtime, and pyproject.toml
builds it. The suite runs on an editable install, which reads src/ directly and so hides a file
left out of [tool.setuptools.package-data] or metadata that cannot be built."""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import zipfile
from email.message import Message
from pathlib import Path
from typing import Any

import pytest

import livecam
from livecam.models import catalog
from livecam.samples import SAMPLES

if sys.version_info >= (3, 11):
    import tomllib
else:
    tomllib = pytest.importorskip("tomli", reason="reading pyproject.toml needs tomllib (3.11+) or tomli")

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "livecam"
PYPROJECT = ROOT / "pyproject.toml"

pytestmark = pytest.mark.skipif(not PYPROJECT.is_file(), reason="pyproject.toml is not in this checkout")

# PEP 639 SPDX expressions in project.license: setuptools 77 is the first that reads them
SETUPTOOLS_FOR_LICENSE_EXPRESSION = (77,)


def pyproject() -> dict[str, Any]:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))


def data_files() -> set[str]:
    """Every file under src/livecam that is not Python source, relative to the package."""
    return {p.relative_to(SRC).as_posix() for p in SRC.rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
            and not p.name.startswith(".")}


def runtime_files() -> set[str]:
    """The files the code itself opens beside its modules: the embedded models (catalog), the
    digests they are verified against, the demo's sample photos and the PEP 561 marker."""
    package = Path(livecam.__file__).resolve().parent
    default = catalog.DEFAULT_DIR.relative_to(package).as_posix()
    models = {f"{default}/{spec.file_name}" for spec in catalog.CATALOG.values() if spec.bundled}
    return models | {f"{default}/SHA256SUMS", "py.typed"} | {f"samples/{s.file}" for s in SAMPLES.values()}


def package_data_matches() -> set[str]:
    """What [tool.setuptools.package-data] takes: its globs, relative to the package as setuptools
    expands them."""
    globs = pyproject()["tool"]["setuptools"]["package-data"]["livecam"]
    return {p.relative_to(SRC).as_posix() for pattern in globs for p in SRC.glob(pattern) if p.is_file()}


def test_every_file_the_code_loads_is_in_src() -> None:
    missing = sorted(f for f in runtime_files() if not (SRC / f).is_file())
    assert not missing, f"livecam loads files that src/livecam lacks: {missing}"


def test_package_data_ships_every_data_file() -> None:
    left_out = sorted((data_files() | runtime_files()) - package_data_matches())
    assert not left_out, f"not matched by [tool.setuptools.package-data], so missing from the wheel: {left_out}"


def test_build_backend_reads_the_licence_expression() -> None:
    """`license = "MIT ..."` (a string, PEP 639) fails the build on setuptools < 77, which an
    install without build isolation (or a distro build) takes when build-system allows it."""
    project = pyproject()
    if not isinstance(project["project"]["license"], str):
        pytest.skip("project.license is a table, which every setuptools reads")
    requires = [r.replace(" ", "") for r in project["build-system"]["requires"]]
    floors = [tuple(int(x) for x in r.split(">=")[1].split(".")) for r in requires if r.startswith("setuptools>=")]
    assert floors and floors[0] >= SETUPTOOLS_FOR_LICENSE_EXPRESSION, \
        f"build-system.requires {requires} allows a setuptools older than 77, which refuses project.license"


def test_licence_expression_names_every_bundled_models_licence() -> None:
    expression = pyproject()["project"]["license"]
    terms = set(str(expression).replace("(", " ").replace(")", " ").split()) - {"AND", "OR", "WITH"}
    bundled = {spec.licence for spec in catalog.CATALOG.values() if spec.bundled}
    assert bundled <= terms, f"the wheel ships models under {sorted(bundled)}; project.license says {expression!r}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this checkout, offline, with the setuptools installed here."""
    setuptools = pytest.importorskip("setuptools", reason="building the wheel needs setuptools")
    version = tuple(int(x) for x in setuptools.__version__.split(".")[:2])
    if version < SETUPTOOLS_FOR_LICENSE_EXPRESSION:
        pytest.skip(f"setuptools {setuptools.__version__} here; building livecam needs >= 77 (pip install -e '.[dev]')")
    # from a copy: setuptools builds in the tree, and a stale build/lib there would fill the gaps
    tree = tmp_path_factory.mktemp("tree")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(SRC, tree / "src" / "livecam", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("wheel")
    # the PEP 517 hook pip calls (pip itself adds seconds of start-up and nothing checked here)
    build = f"import setuptools.build_meta as b; b.build_wheel({str(out)!r})"
    done = subprocess.run([sys.executable, "-c", build], cwd=tree, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (path,) = out.glob("livecam-*.whl")
    return path


def metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return email.message_from_bytes(z.read(name))


def test_wheel_holds_every_module_and_data_file(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    expected = {p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py")} | data_files() | runtime_files()
    missing = sorted(f for f in expected if f"livecam/{f}" not in names)
    assert not missing, f"the wheel lacks: {missing}"
    licences = sorted(n.rsplit("/", 1)[1] for n in names if ".dist-info/licenses/" in n)
    assert licences == ["LICENSE", "LICENSE-APACHE-2.0.txt", "LICENSE-MIT-invisible-watermark.txt", "NOTICE.md"]


def test_wheel_metadata_says_what_pyproject_says(wheel: Path) -> None:
    project = pyproject()["project"]
    meta = metadata(wheel)
    assert meta["Name"] == "livecam" and meta["Version"] == livecam.__version__
    assert set(meta["Requires-Python"].replace(" ", "").split(",")) == set(project["requires-python"].split(","))
    assert meta["License-Expression"] == project["license"]
    assert sorted(meta.get_all("Provides-Extra") or []) == sorted(project["optional-dependencies"])
    with zipfile.ZipFile(wheel) as z:
        entry_points = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert "livecam = livecam.__main__:main" in entry_points
