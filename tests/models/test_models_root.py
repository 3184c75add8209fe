"""Where models live: --models-dir, else the checkout's models/, else the user data folder."""

from __future__ import annotations

from pathlib import Path

from livecam.models import store as store_module
from livecam.models.store import checkout_root, models_root
from livecam.settings import RuntimeSettings

REPO = Path(__file__).resolve().parents[2]


def test_models_dir_option_wins(tmp_path) -> None:
    assert models_root(RuntimeSettings(models_dir=tmp_path / "x")) == tmp_path / "x"


def test_checkout_uses_its_models_folder() -> None:
    assert checkout_root() == REPO
    assert models_root(RuntimeSettings()) == REPO / "models"


def test_installed_package_uses_the_user_data_folder(tmp_path, monkeypatch) -> None:
    fake_pkg = tmp_path / "lib" / "site-packages" / "livecam"
    fake_pkg.mkdir(parents=True)
    monkeypatch.setattr(store_module, "PACKAGE_DIR", fake_pkg)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert checkout_root() is None
    root = models_root(RuntimeSettings())
    assert root.name == "models" and "livecam" in root.parts and REPO not in root.parents


def test_another_projects_pyproject_is_not_a_checkout(tmp_path, monkeypatch) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "something-else"\n')
    fake_pkg = tmp_path / "src" / "livecam"
    fake_pkg.mkdir(parents=True)
    monkeypatch.setattr(store_module, "PACKAGE_DIR", fake_pkg)
    assert checkout_root() is None


def test_a_models_folder_that_is_a_link_to_nothing_is_named_before_any_download(tmp_path) -> None:
    # "cannot create the models folder X: File exists; pass --models-dir": X is a link to a folder that is gone
    import pytest

    from livecam.errors import ModelError
    from livecam.models.store import ModelStore

    (tmp_path / "models").symlink_to(tmp_path / "gone")
    store = ModelStore(RuntimeSettings(models_dir=tmp_path / "models", accept_license=True), progress=False)
    with pytest.raises(ModelError, match=r"the models folder .*models \(--models-dir\) is a link to .*gone, "
                                         r"which does not exist"):
        store.path("gfpgan_1.4")


def test_a_models_folder_that_cannot_be_created_names_where_it_came_from(tmp_path, monkeypatch) -> None:
    # it said "pass --models-dir" to a user who had set LIVECAM_MODELS_DIR and typed no option
    import os

    from tests.conftest import run_cli

    blocker = tmp_path / "file"
    blocker.write_text("")
    env = {k: v for k, v in os.environ.items() if k != "LIVECAM_OFFLINE"}  # the folder is made before any download
    env.update(LIVECAM_MODELS_DIR=str(blocker / "models"), LIVECAM_CACHE_DIR=str(tmp_path / "cache"))
    from_env = run_cli(["--accept-license", "models", "download", "gfpgan_1.4"], env=env, timeout=60)
    assert from_env.returncode == 3 and "Traceback" not in from_env.stderr
    # mkdir says only "Not a directory": which part of the path is the file is named
    assert f"{blocker / 'models'} (LIVECAM_MODELS_DIR): {blocker} is a file, not a folder; set LIVECAM_MODELS_DIR " \
           f"to another folder" in from_env.stderr and "--models-dir" not in from_env.stderr
    given = run_cli(["--models-dir", str(blocker / "other"), "--accept-license", "models", "download", "gfpgan_1.4"],
                    env=env, timeout=60)
    assert given.returncode == 3 and f"{blocker / 'other'} (--models-dir): {blocker} is a file, not a " \
                                      f"folder; give --models-dir another folder" in given.stderr
    assert "LIVECAM_MODELS_DIR" not in given.stderr


def test_a_default_models_folder_that_cannot_be_created_names_both_ways_to_another(tmp_path, monkeypatch) -> None:
    import pytest

    from livecam.errors import ModelError
    from livecam.models.store import ModelStore

    fake_pkg = tmp_path / "lib" / "site-packages" / "livecam"
    fake_pkg.mkdir(parents=True)
    monkeypatch.setattr(store_module, "PACKAGE_DIR", fake_pkg)
    (tmp_path / "data").write_text("")  # the user data folder's parent is a file
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    store = ModelStore(RuntimeSettings(accept_license=True), progress=False)
    with pytest.raises(ModelError, match=r"\(the default\): \S+data is a file, not a folder; pass --models-dir \(or set "
                                         r"LIVECAM_MODELS_DIR\) to use another one"):
        store.path("gfpgan_1.4")
