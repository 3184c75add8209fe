"""`livecam models list|download|verify|where|convert`."""

from __future__ import annotations

import importlib
import os
from dataclasses import replace
from pathlib import Path

import click

from livecam.atomic import AtomicOutput, check_new_output
from livecam.console import agree, counted, one_line
from livecam.errors import EXIT_MODEL, InputError, LicenseNotAcceptedError, ModelError
from livecam.paths import why_missing
from livecam.models.store import (CORRUPT, MISSING, PRESENT, UNPINNED, VERIFIED, ModelState, ModelStore,
                                  tty_confirm)
from livecam.settings import ENHANCER_MODELS, RuntimeSettings


def _echo(line: str, err: bool = False) -> None:
    """One line of output with its control characters escaped, as every stderr message is: a
    models folder or a model's detail could hold a newline or a terminal escape."""
    click.echo(one_line(line), err=err)


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.0f} kB"


def list_models(settings: RuntimeSettings) -> None:
    store = ModelStore(settings, progress=False)
    rows = [("NAME", "SIZE", "LICENCE", "STATE", "LOCATION")]
    broken: list[str] = []  # what is wrong with each corrupt file and its repair, as doctor says them
    for name in store.names():
        spec = store.spec(name)
        st = store.state(name)
        size = spec.size if spec.size is not None else (st.path.stat().st_size if st.state != MISSING else None)
        state = st.state + ("" if st.state != PRESENT else " (not verified yet)")
        if spec.bundled:
            state += ", embedded"
        licence = spec.licence + (" [needs --accept-license]" if spec.needs_acceptance else "")
        rows.append((name, _size(size), licence, state, str(st.path)))
        if st.state == CORRUPT:
            broken.append(f"{name}: {st.path} is corrupt ({st.detail}); {store.fix_hint(spec, st.path)}")
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        _echo("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4])
    for line in broken:
        _echo(line, err=True)


def where_models(settings: RuntimeSettings) -> None:
    _echo(str(ModelStore(settings, progress=False).root))


def download_models(settings: RuntimeSettings, names: tuple[str, ...], accept: bool, every: bool = False) -> None:
    """The named models; without names the default set (ModelSpec.default_download), or every
    downloadable one with `every` (--all)."""
    settings = replace(settings, accept_license=settings.accept_license or accept)
    store = ModelStore(settings, progress=not settings.quiet, confirm=lambda spec: False)
    wanted = list(dict.fromkeys(names)) or [n for n in store.names() if store.spec(n).downloadable
                                            and (every or store.spec(n).default_download)]
    specs = [store.spec(n) for n in wanted]  # unknown names fail here, before anything is fetched
    for spec in specs:
        if spec.bundled:
            _echo(f"{spec.name}: embedded in the package, nothing to download")
    # What has to be fetched: missing files, and files that turn out corrupt (a present file not
    # hashed yet is hashed now, an unpinned one loaded: asking for a download is asking for a good file).
    states: dict[str, ModelState] = {}
    for spec in specs:
        if not spec.bundled:
            st = store.state(spec.name)
            states[spec.name] = store.verify(spec.name) if st.state in (PRESENT, UNPINNED) else st
    fetch = [s for s in specs if not s.bundled and states[s.name].state in (MISSING, CORRUPT)]
    for spec in fetch:
        if states[spec.name].path.is_dir():  # never replaced: a folder is the user's to move
            raise ModelError(f"{states[spec.name].path} is a folder, where model {spec.name}'s file goes; "
                             f"move it away and run the download again")
    if settings.offline and fetch:
        listed = [s.name for s in fetch]
        # --all: a count and the command again; every model's name twice made a line of 600 characters
        what = counted(len(listed), "missing model") if every else ", ".join(listed)
        raise ModelError(f"offline mode forbids downloading {what}; run "
                         f"`{store.download_command(*listed, every=every)}` without "
                         f"--offline/LIVECAM_OFFLINE")
    if not settings.accept_license:
        refused: list[str] = []
        by_licence: dict[str, list] = {}
        for spec in fetch:
            if spec.needs_acceptance:
                by_licence.setdefault(spec.licence, []).append(spec)
        for group in by_licence.values():  # one question per licence, naming every model under it
            group_names = ", ".join(s.name for s in group)
            _echo(f"{group_names}: licence {group[0].licence} ({group[0].licence_url})", err=True)
            if not tty_confirm(group[0]):
                refused.extend(s.name for s in group)
        if refused:  # nothing was fetched: the command again fetches them all, not only the refused ones
            listed = [s.name for s in fetch]
            raise LicenseNotAcceptedError(
                f"{', '.join(refused)} {agree(len(refused), 'needs its', 'need their')} licence accepted "
                f"before downloading; "
                f"rerun with --accept-license (`{store.download_command(*listed, every=every)}`)")
        settings = replace(settings, accept_license=True)  # what was asked above now counts as accepted
        store = ModelStore(settings, progress=not settings.quiet, confirm=lambda spec: False)
    for spec in specs:
        if spec.bundled:
            continue
        st = states[spec.name]
        if st.state in (VERIFIED, UNPINNED):
            _echo(f"{spec.name}: already present ({st.state})")
            continue
        if spec.needs_acceptance:  # to be fetched, so accepted by now (flag or question)
            _echo(f"{spec.name}: licence {spec.licence} ({spec.licence_url}) accepted", err=True)
        if st.state == CORRUPT:
            path = _replace_corrupt(store, spec.name, st.path)
        else:
            path = store.path(spec.name)
        _echo(f"{spec.name}: {path}")


def _replace_corrupt(store: ModelStore, name: str, bad: Path) -> Path:
    """Download `name` over its corrupt file; the old file is put back if the download fails."""
    _echo(f"{name}: {bad} is corrupt; downloading a fresh copy", err=True)
    aside = bad.with_name(f".{bad.name}.corrupt")
    try:
        os.replace(bad, aside)
    except FileNotFoundError:  # another livecam is replacing it: store.path waits for its download
        return store.path(name)
    try:
        path = store.path(name)
    except BaseException:
        os.replace(aside, bad)
        raise
    aside.unlink(missing_ok=True)
    return path


def verify_models(settings: RuntimeSettings, names: tuple[str, ...]) -> int:
    store = ModelStore(settings, progress=False)
    wanted = list(dict.fromkeys(names)) or store.names()
    for n in wanted:
        store.spec(n)  # unknown names: a usage error before any hashing
    failed = 0
    missing: list[str] = []  # of the models named: a script's `models verify X && ...` went on without X
    for name in wanted:
        st = store.verify(name)
        if st.state == CORRUPT:
            failed += 1
        if st.state == MISSING and names:
            # said once, on stderr with its fix below: a stdout row too told it twice in two streams
            missing.append(name)
            continue
        where = "" if st.state == MISSING else f" {st.path}"
        detail = f": {st.detail}" if st.detail else ""  # the detail may hold parentheses itself
        line = f"{name}: {st.state}{where}{detail}"
        _echo(line, err=st.state == CORRUPT)
    problems = [f"{counted(failed, 'model file')} failed verification"] if failed else []
    if missing:
        problems.append(f"{', '.join(missing)} {agree(len(missing), 'is', 'are')} not downloaded "
                        f"(`{store.download_command(*missing)}`)")
    if problems:
        _echo(f"livecam: error: {'; '.join(problems)}", err=True)
        return EXIT_MODEL
    return 0


def convert_model(settings: RuntimeSettings, checkpoint: Path, output: Path | None, force: bool,
                  fp16: bool = False) -> None:
    """`models convert CHECKPOINT`; with `fp16`, CHECKPOINT names an enhancer whose fp16 copy is made again."""
    if fp16:
        _echo(str(_convert_fp16(settings, str(checkpoint), output)))
        return
    from livecam.media.images import check_not_an_input, check_output_folder  # (OpenCV: not for `models list`)

    if checkpoint.is_dir():  # was reported as "not found"
        raise InputError(f"checkpoint {checkpoint} is a folder; give the GFPGANv1.4.pth file in it")
    if not checkpoint.exists():
        raise InputError(f"checkpoint {checkpoint} {why_missing(checkpoint, 'download GFPGANv1.4.pth first')}")
    if not checkpoint.is_file():  # a FIFO or a device was "not found"
        raise InputError(f"checkpoint {checkpoint} is not a regular file; give the GFPGANv1.4.pth file")
    store = ModelStore(settings, progress=False)
    target = output or store.root / store.spec("gfpgan_1.4").file_name
    check_not_an_input(target, checkpoint)  # -o CHECKPOINT --force replaced the checkpoint with its conversion
    if output is not None:  # made its missing folders and wrote any extension; the models folder is made
        if output.suffix.lower() != ".onnx":
            raise InputError(f"cannot write an ONNX model to {output} (extension {output.suffix or 'missing'}); "
                             f"name it {output.stem}.onnx")
        check_output_folder(output)
    # after the name's checks: an existing notes.txt was told "add --force", and with it "name it notes.onnx"
    check_new_output(target, force=force)
    try:
        importlib.import_module("torch")  # only to give a clear message when it is missing
        from livecam.models.convert import convert_gfpgan
    except ImportError as exc:
        raise InputError(f"converting needs extra packages ({exc.name or exc} is missing); "
                         f"run: pip install 'livecam[convert]'") from exc
    target.parent.mkdir(parents=True, exist_ok=True)
    with AtomicOutput(target, force=force) as out:  # never a half-written model under the real name
        convert_gfpgan(checkpoint, out.temp)
        problem = store.load_problem("gfpgan_1.4", out.temp)
        if problem:
            raise ModelError(f"the converted model does not look like GFPGAN v1.4 ({problem}); "
                             f"is {checkpoint} GFPGANv1.4.pth?")
    _echo(str(target))


def _convert_fp16(settings: RuntimeSettings, name: str, output: Path | None) -> Path:
    """The enhancer `name`'s fp16 copy converted and checked again from its fp32 file, replacing
    the one in the models folder (catalog.repair's line for a damaged copy names this)."""
    if output is not None:
        raise InputError("--fp16 writes the copy into the models folder's fp16/, where runs look for it; "
                         "leave out --output")
    if name not in ENHANCER_MODELS:
        raise InputError(f"--fp16 makes an enhancer's fp16 copy; give one of {', '.join(ENHANCER_MODELS)}, "
                         f"not {name!r}")
    from livecam.models import fp16

    store = ModelStore(settings, progress=not settings.quiet)
    return fp16.converted(store, name, store.path(name), fresh=True)
