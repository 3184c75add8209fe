"""The command lines README.md and docs/MARKS.md show parse as livecam's CLI reads them."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/MARKS.md")


def code_lines(page: str) -> list[str]:
    """The `livecam ...` commands of PAGE's code blocks (indented 4 spaces), as a user types them:
    comments dropped, `a && livecam demo` split, `[--optional words]` taken as typed."""
    found = []
    for line in (ROOT / page).read_text(encoding="utf-8").splitlines():
        if not line.startswith("    "):
            continue
        for part in line.strip().split("&&"):
            words = shlex.split(part, comments=True)
            if words[:1] == ["livecam"]:
                found.append(" ".join(shlex.quote(w.strip("[]")) for w in words))
    return found


COMMANDS = [(page, line) for page in PAGES for line in code_lines(page)]


def test_the_pages_show_commands() -> None:
    # a change of the code blocks' indent would otherwise leave the test below with nothing to check
    assert len(code_lines("README.md")) >= 20 and len(code_lines("docs/MARKS.md")) >= 2


def _without_actions(command: click.Command, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command of the tree does nothing once its options are parsed (models, files, network)."""
    if command.callback is not None:
        monkeypatch.setattr(command, "callback", lambda **_: None)
    for sub in getattr(command, "commands", {}).values():
        _without_actions(sub, monkeypatch)


@pytest.mark.parametrize(("page", "line"), COMMANDS, ids=[f"{p}: {line}" for p, line in COMMANDS])
def test_every_command_shown_parses(page: str, line: str, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    # A renamed or removed option, or a choice that is no longer one, left the README's example
    # failing with "No such option" for whoever typed it; the whole CLI path (variadic options,
    # click, the option callbacks) reads each line here, and only the commands' actions are skipped.
    from livecam.cli import cli

    _without_actions(cli, monkeypatch)
    monkeypatch.delenv("LIVECAM_CLUSTER", raising=False)
    with pytest.raises(SystemExit) as exited:
        cli.main(args=shlex.split(line)[1:], prog_name="livecam")
    assert exited.value.code == 0, f"{page}: `{line}`: {capsys.readouterr().err}"


def _options(command: click.Command) -> set[str]:
    found = {"--help"} | {opt for param in command.params if isinstance(param, click.Option)
                          for opt in (*param.opts, *param.secondary_opts)}
    for sub in getattr(command, "commands", {}).values():
        found |= _options(sub)
    return found


def test_every_option_the_readme_names_exists() -> None:
    # the prose names options too (`--face-mask-blur 0..1`, `--keep-partial`...), outside any code block
    from livecam.cli import cli

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]", text))
    not_livecams = {"--head", "--only-binary"}  # `ray start --head`, pip's
    assert sorted(named - not_livecams - _options(cli)) == []


def _choices(command: click.Command, option: str) -> tuple[str, ...]:
    for param in command.params:
        if option in param.opts and isinstance(param.type, click.Choice):
            return tuple(map(str, param.type.choices))
    for sub in getattr(command, "commands", {}).values():
        if found := _choices(sub, option):
            return found
    return ()


def _listed(text: str, option: str) -> list[str]:
    """The values README.md gives OPTION: `--opt a|b|c`, `--opt a,b,c ...` or `--opt` (`a`, `b`, ...)."""
    flat = " ".join(text.split())
    inline = re.search(rf"`{option} ([\w.|,-]+)(?: \.\.\.)?`", flat)
    if inline and ("|" in inline.group(1) or "," in inline.group(1)):
        return re.split(r"[|,]", inline.group(1))
    listed = re.search(rf"`{option}` \(((?:`[\w.-]+`, )+`[\w.-]+`)\)", flat)
    assert listed is not None, f"README.md lists no values of {option}"
    return re.findall(r"`([\w.-]+)`", listed.group(1))


@pytest.mark.parametrize("option", ["--execution-provider", "--swap-model", "--pixel-boost", "--enhancer-model",
                                    "--enhancer-precision", "--face-selector-order"])
def test_the_readme_lists_every_choice_of_an_option(option: str) -> None:
    # a choice added to or dropped from the CLI left the README's list of them stale
    from livecam.cli import cli

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert sorted(_listed(text, option)) == sorted(_choices(cli, option))


def test_the_readme_lists_every_face_mask_name() -> None:
    # these three take free words, checked when the run starts: their names live in settings
    from livecam.settings import FACE_MASK_AREAS, FACE_MASK_REGIONS, FACE_MASK_TYPES

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert _listed(text, "--face-mask") == list(FACE_MASK_TYPES)
    assert _listed(text, "--face-mask-areas") == list(FACE_MASK_AREAS)
    assert _listed(text, "--face-mask-regions") == list(FACE_MASK_REGIONS)


def _command_options(command: click.Group) -> set[str]:
    """Every option some command of the tree takes, the tree's own excepted."""
    return set().union(*(_options(sub) for sub in command.commands.values()))


def test_livecams_own_options_are_shown_before_the_command() -> None:
    # `-q` and `--offline` were named alone, as if a command took them: typed after it (`livecam
    # video clips out -s f.jpg -q`), they are "No such option"
    from livecam.cli import cli

    own = {opt for param in cli.params if isinstance(param, click.Option)
           for opt in (*param.opts, *param.secondary_opts)} - _command_options(cli) - {"--version"}
    assert {"-q", "--offline", "--models-dir"} <= own
    for page in PAGES:
        text = " ".join((ROOT / page).read_text(encoding="utf-8").split())
        for span in re.findall(r"`([^`]+)`", text):
            words = span.split()
            for flag in own & set(words):
                before = words[:words.index(flag)]
                assert before[:1] == ["livecam"] and not set(before) & set(cli.commands), \
                    f"{page}: `{span}`: {flag} goes between livecam and the command"
