"""What a user installs: the wheel holds every file livecam reads at runtime, and pyproject.toml
builds it. The suite runs on an editable install, which reads src/ directly and so hides a file
left out of [tool.setuptools.package-data] or metadata that cannot be built."""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import tarfile
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


# What a source checkout holds beyond src/: copied into the build tree, so the sdist is made from
# what a maintainer's `python -m build` sees (caches and virtual environments left out).
TREE = ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "BENCHMARKS.md", "src", "tests", "scripts",
        "docs", ".ci", "models/README.md")
CACHES = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".pytest_cache", ".mypy_cache")
# What the test suite reads beside tests/ (README, the architecture doc, the scripts it runs, CI's files)
SUITE_NEEDS = ("README.md", "docs", "scripts", ".ci")


def tree_files(*names: str) -> set[str]:
    """The files under these checkout paths, relative to the checkout, caches left out."""
    found: set[str] = set()
    for name in names:
        path = ROOT / name
        paths = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        found |= {p.relative_to(ROOT).as_posix() for p in paths
                  if "__pycache__" not in p.parts and p.suffix != ".pyc"}
    return found


def build(hook: str, tree: Path, out: Path) -> Path:
    """Run a PEP 517 hook of setuptools (what pip and `python -m build` call) in `tree`, offline."""
    call = f"import setuptools.build_meta as b; print(b.{hook}({str(out)!r}))"
    done = subprocess.run([sys.executable, "-c", call], cwd=tree, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return out / done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist built from a copy of this checkout, with the setuptools installed here."""
    setuptools = pytest.importorskip("setuptools", reason="building the sdist and wheel needs setuptools")
    version = tuple(int(x) for x in setuptools.__version__.split(".")[:2])
    if version < SETUPTOOLS_FOR_LICENSE_EXPRESSION:
        pytest.skip(f"setuptools {setuptools.__version__} here; building livecam needs >= 77 (pip install -e '.[dev]')")
    # from a copy: setuptools builds in the tree, and a stale build/lib there would fill the gaps
    tree = tmp_path_factory.mktemp("tree")
    for name in TREE:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, tree / name, ignore=CACHES)
        elif (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    return build("build_sdist", tree, tmp_path_factory.mktemp("sdist"))


def sdist_names(sdist: Path) -> set[str]:
    with tarfile.open(sdist) as t:
        return {m.name.split("/", 1)[1] for m in t.getmembers() if m.isfile() and "/" in m.name}


@pytest.fixture(scope="module")
def wheel(sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from the unpacked sdist, as pip and `python -m build` make it."""
    unpacked = tmp_path_factory.mktemp("unpacked")
    with tarfile.open(sdist) as t:
        # the "data" filter (safe paths) where this Python has it (3.10.12+, 3.11.4+)
        t.extractall(unpacked, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    (tree,) = unpacked.iterdir()
    return build("build_wheel", tree, tmp_path_factory.mktemp("wheel"))


def test_sdist_holds_the_whole_test_suite(sdist: Path) -> None:
    """Someone with only the sdist can run `bash scripts/test.sh`: every file of tests/ (setuptools
    alone takes only tests/test*.py, not conftest.py nor any subfolder) and what the tests read."""
    expected = tree_files("tests", *SUITE_NEEDS)
    missing = sorted(expected - sdist_names(sdist))
    assert not missing, f"the sdist lacks (add them to MANIFEST.in): {missing}"


def test_wheel_holds_no_tests_nor_anything_beside_the_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        tops = {n.split("/", 1)[0] for n in z.namelist()}
    assert tops == {"livecam", f"livecam-{livecam.__version__}.dist-info"}, f"the wheel installs {sorted(tops)}"


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


# The CUDA major each onnxruntime-gpu release on PyPI is built for (its `cuda` extra's
# nvidia-*-cu12 / nvidia-* 13 wheels): 12 up to 1.26, 13 from 1.27. The last for Python 3.10 is 1.23.2.
ORT_GPU_CUDA13_FROM = "1.27"
ORT_GPU_LAST_FOR_310 = "1.23.2"
PYTHONS = ("3.10", "3.11", "3.12", "3.13")


def extra_requirements(extra: str, python: str) -> list[Any]:
    """The requirements `pip install 'livecam[extra]'` takes on `python`, self-references expanded."""
    from packaging.requirements import Requirement

    found: list[Any] = []
    for line in pyproject()["project"]["optional-dependencies"][extra]:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"python_version": python, "extra": extra}):
            continue
        if req.name == "livecam":
            found += [r for inner in sorted(req.extras) for r in extra_requirements(inner, python)]
        else:
            found.append(req)
    return found


def cuda_majors(extra: str, python: str) -> set[int]:
    """The CUDA majors an install of the extra can pull in on `python`: onnxruntime-gpu's, by the
    releases its pins allow there, and TensorRT's (tensorrt-cu12 / -cu13)."""
    from packaging.specifiers import SpecifierSet

    reqs = extra_requirements(extra, python)
    ort = SpecifierSet()
    for r in reqs:
        if r.name == "onnxruntime-gpu":
            ort &= r.specifier
    if python == "3.10":
        ort &= SpecifierSet(f"<={ORT_GPU_LAST_FOR_310}")
    majors = set()
    if any(r.name == "onnxruntime-gpu" for r in reqs):
        # does the pin admit any CUDA 12 release (1.21..1.26.x) and any CUDA 13 one (1.27 on)?
        if any(v in ort for v in ("1.21.0", "1.22.0", "1.23.2", "1.24.4", "1.25.1", "1.26.0")):
            majors.add(12)
        if any(v in ort for v in (ORT_GPU_CUDA13_FROM + ".0", "1.28.0", "1.31.1", "9.0")):
            majors.add(13)
    for r in reqs:
        if r.name.startswith("tensorrt"):
            assert r.name in ("tensorrt-cu12", "tensorrt-cu13"), \
                f"{extra}: {r} does not say its CUDA major (the bare `tensorrt` follows NVIDIA's newest)"
            majors.add(int(r.name[-2:]))
    return majors


@pytest.mark.parametrize("python", PYTHONS)
def test_one_cuda_major_per_gpu_install(python: str) -> None:
    """`pip install 'livecam[cuda,tensorrt]'` must not mix CUDA 12 and 13 wheels: Python
    3.10 gets only CUDA 12 onnxruntime-gpu while the unpinned `tensorrt` is CUDA 13."""
    # [cuda] alone is one onnxruntime-gpu release, whose own extras are of one major; [tensorrt]
    # holds [cuda], so `livecam[cuda,tensorrt]` resolves as [tensorrt] does
    majors = cuda_majors("tensorrt", python)
    assert len(majors) == 1, f"livecam[cuda,tensorrt] on Python {python} can install CUDA {sorted(majors)} wheels"


def test_tensorrt_is_the_major_onnxruntime_loads() -> None:
    # onnxruntime-gpu's TensorRT provider needs libnvinfer.so.10 (1.23.2 and 1.31.1 read): TensorRT 11 never loads
    from packaging.specifiers import SpecifierSet

    for python in PYTHONS:
        trt = [r for r in extra_requirements("tensorrt", python) if r.name.startswith("tensorrt")]
        assert len(trt) == 1 and "11.0" not in trt[0].specifier and "10.16" in trt[0].specifier, (python, trt)
        assert not SpecifierSet(str(trt[0].specifier)).contains("9.0"), trt


def test_classifiers_name_the_pythons_requires_python_allows() -> None:
    from packaging.specifiers import SpecifierSet

    project = pyproject()["project"]
    allowed = SpecifierSet(project["requires-python"])
    said = {c.rsplit(" ", 1)[1] for c in project.get("classifiers", [])
            if c.startswith("Programming Language :: Python :: 3.")}
    assert said == {f"3.{minor}" for minor in range(0, 20) if f"3.{minor}" in allowed}


def test_readme_installs_tensorrt_through_the_extra() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "' tensorrt" not in readme and "install tensorrt" not in readme, \
        "README installs the bare `tensorrt`, whose CUDA major need not match onnxruntime-gpu's"
    assert "[tensorrt]" in readme
