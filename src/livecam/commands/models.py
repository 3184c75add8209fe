"""`livecam models list|download|verify|where|convert`."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import click

from livecam.errors import EXIT_MODEL, InputError, LicenseNotAcceptedError, ModelError, OutputExistsError
from livecam.models.store import CORRUPT, MISSING, PRESENT, UNPINNED, VERIFIED, ModelStore, tty_confirm
from livecam.settings import RuntimeSettings


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.0f} kB"


def list_models(settings: RuntimeSettings) -> None:
    store = ModelStore(settings, progress=False)
    rows = [("NAME", "SIZE", "LICENCE", "STATE", "LOCATION")]
    for name in store.names():
        spec = store.spec(name)
        st = store.state(name)
        size = spec.size if spec.size is not None else (st.path.stat().st_size if st.state != MISSING else None)
        state = st.state + ("" if st.state != PRESENT else " (not verified yet)")
        if spec.bundled:
            state += ", embedded"
        licence = spec.licence + (" [needs --accept-license]" if spec.needs_acceptance else "")
        rows.append((name, _size(size), licence, state, str(st.path)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        click.echo("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4])


def where_models(settings: RuntimeSettings) -> None:
    click.echo(str(ModelStore(settings, progress=False).root))


def download_models(settings: RuntimeSettings, names: tuple[str, ...], accept: bool) -> None:
    settings = replace(settings, accept_license=settings.accept_license or accept)
    store = ModelStore(settings, progress=not settings.quiet, confirm=lambda spec: False)
    wanted = list(dict.fromkeys(names)) or [n for n in store.names() if store.spec(n).downloadable]
    specs = [store.spec(n) for n in wanted]  # unknown names fail here, before anything is fetched
    for spec in specs:
        if spec.bundled:
            click.echo(f"{spec.name}: embedded in the package, nothing to download")
    todo = [s for s in specs if not s.bundled and store.state(s.name).state in (MISSING, PRESENT, CORRUPT)]
    missing = [s.name for s in todo if store.state(s.name).state == MISSING]
    if settings.offline and missing:
        raise ModelError(f"offline mode forbids downloading {', '.join(missing)}; "
                         f"run `livecam models download {' '.join(missing)}` without --offline/LIVECAM_OFFLINE")
    if not settings.accept_license:
        refused: list[str] = []
        by_licence: dict[str, list] = {}
        for spec in todo:
            if spec.needs_acceptance and spec.name in missing:
                by_licence.setdefault(spec.licence, []).append(spec)
        for group in by_licence.values():  # one question per licence, naming every model under it
            names = ", ".join(s.name for s in group)
            click.echo(f"{names}: licence {group[0].licence} ({group[0].licence_url})", err=True)
            if not tty_confirm(group[0]):
                refused.extend(s.name for s in group)
        if refused:
            raise LicenseNotAcceptedError(
                f"{', '.join(refused)} need(s) their licence accepted before downloading; "
                f"rerun with --accept-license (`livecam models download --accept-license {' '.join(refused)}`)")
        settings = replace(settings, accept_license=True)  # what was asked above now counts as accepted
        store = ModelStore(settings, progress=not settings.quiet, confirm=lambda spec: False)
    for spec in specs:
        if spec.bundled:
            continue
        state = store.state(spec.name).state
        if state in (VERIFIED, UNPINNED):
            click.echo(f"{spec.name}: already present ({state})")
            continue
        if spec.needs_acceptance:
            click.echo(f"{spec.name}: licence {spec.licence} ({spec.licence_url}) accepted", err=True)
        path = store.path(spec.name)
        click.echo(f"{spec.name}: {path}")


def verify_models(settings: RuntimeSettings, names: tuple[str, ...]) -> int:
    store = ModelStore(settings, progress=False)
    wanted = list(dict.fromkeys(names)) or store.names()
    for n in wanted:
        store.spec(n)  # unknown names: a usage error before any hashing
    failed = 0
    for name in wanted:
        st = store.verify(name)
        if st.state == CORRUPT:
            failed += 1
        detail = f" ({st.detail})" if st.detail else ""
        where = "" if st.state == MISSING else f" {st.path}"
        line = f"{name}: {st.state}{detail}{where}"
        click.echo(line, err=st.state == CORRUPT)
    if failed:
        click.echo(f"livecam: error: {failed} model file(s) failed verification", err=True)
        return EXIT_MODEL
    return 0


def convert_model(settings: RuntimeSettings, checkpoint: Path, output: Path | None, force: bool) -> None:
    if not checkpoint.is_file():
        raise InputError(f"checkpoint {checkpoint} not found; download GFPGANv1.4.pth first")
    store = ModelStore(settings, progress=False)
    target = output or store.root / store.spec("gfpgan_1.4").file_name
    if target.exists() and not force:
        raise OutputExistsError(f"{target} exists; pass --force to overwrite it")
    try:
        import torch  # noqa: F401 - only to give a clear message when it is missing
        from livecam.models.convert import convert_gfpgan
    except ImportError as exc:
        raise InputError(f"converting needs extra packages ({exc.name or exc} is missing); "
                         f"run: pip install 'livecam[convert]'") from exc
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")  # never a half-written model under the real name
    try:
        convert_gfpgan(checkpoint, part)
        problem = store.load_problem("gfpgan_1.4", part)
        if problem:
            raise ModelError(f"the converted model does not look like GFPGAN v1.4 ({problem}); "
                             f"is {checkpoint} GFPGANv1.4.pth?")
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)
    click.echo(str(target))
