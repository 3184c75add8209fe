"""Reading the command line before click does, and the one-line usage messages click gets wrong:
variadic options (`--frame-processor face_swapper face_enhancer`), a mistyped value after them,
livecam's own options given after the command, a file name starting with a dash, roop-style
`-t/-o` flags."""

from __future__ import annotations

import difflib
from typing import Callable, Sequence

import click

from livecam.processors import registry
from livecam.runtime.providers import CHOICES as PROVIDER_CHOICES
from livecam.settings import FACE_MASK_TYPES

# Options that take several values after one flag (`--frame-processor face_swapper face_enhancer`).
# Only values from the option's own choices are taken, so positional arguments are never eaten.
# Callables, so the processor registry is only asked when the option is used.
VARIADIC_OPTIONS: dict[str, Callable[[], Sequence[str]]] = {
    "--frame-processor": registry.names,
    "--execution-provider": lambda: PROVIDER_CHOICES,
    "--face-mask": lambda: FACE_MASK_TYPES,
}


def expand_variadic(args: Sequence[str], strays: list[tuple[str, str]] | None = None) -> list[str]:
    """args with each value after a variadic flag given its own flag; `strays` (when given)
    collects (flag, word) for a word right after a flag's values that is not one of them."""
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        out.append(arg)
        i += 1
        lookup = VARIADIC_OPTIONS.get(arg)
        if lookup is None:
            continue
        choices = lookup()
        if i < len(args):  # the first value always belongs to the flag (click validates it)
            out.append(args[i])
            i += 1
        while i < len(args) and args[i] in choices:
            out.extend([arg, args[i]])
            i += 1
        if strays is not None and i < len(args) and not args[i].startswith("-"):
            strays.append((arg, args[i]))
    return out


def mistyped_variadic_value(strays: Sequence[tuple[str, str]]) -> str:
    """For a usage error: a word right after a variadic flag's values that is close to one of
    its choices (`--frame-processor face_swapper face_enhance`) was taken as a positional
    argument, and click said only "Got unexpected extra argument"; '' when there is none."""
    for flag, word in strays:
        choices = VARIADIC_OPTIONS[flag]()
        close = difflib.get_close_matches(word, choices, n=1, cutoff=0.75)
        if close:
            return f"{word!r} is not a {flag} value; did you mean {close[0]}? (choose from {', '.join(choices)})"
    return ""


def global_usage(group: click.Group, exc: click.UsageError) -> str:
    """For an option of livecam itself given after the command: where it goes; else ''."""
    if not isinstance(exc, click.NoSuchOption) or exc.ctx is None:
        return ""
    for param in group.params:
        if exc.option_name in (*param.opts, *param.secondary_opts):
            flag = isinstance(param, click.Option) and (param.is_flag or param.count)
            value = "" if flag else f" {(param.name or 'value').upper()}"
            command = exc.ctx.command_path.split(" ", 1)[-1]
            return (f"{exc.option_name} is an option of livecam itself: put it before the command, "
                    f"`livecam {exc.option_name}{value} {command} ...`")
    return ""


def command_usage(group: click.Group, argv: Sequence[str], exc: click.UsageError) -> str:
    """For an option of the command given before it (`livecam --no-watermark image ...`): where
    it goes; else ''."""
    if not isinstance(exc, click.NoSuchOption) or exc.ctx is None or exc.ctx.command is not group:
        return ""
    name = next((word for word in argv if word in group.commands), None)
    command = group.commands.get(name) if name else None
    if command is None or not any(exc.option_name in (*param.opts, *param.secondary_opts)
                                  for param in command.params if isinstance(param, click.Option)):
        return ""
    return (f"{exc.option_name} is an option of `livecam {name}`: put it after the command, "
            f"`livecam {name} ... {exc.option_name}`")


def sibling_usage(exc: click.UsageError) -> str:
    """For an option of other commands only (`livecam image --fps 30`: "Did you mean '--map'?"):
    which commands take it; else ''."""
    if not isinstance(exc, click.NoSuchOption) or exc.ctx is None or exc.ctx.parent is None:
        return ""
    siblings = getattr(exc.ctx.parent.command, "commands", {})
    takers = sorted(name for name, command in siblings.items() if command is not exc.ctx.command
                    and any(exc.option_name in (*p.opts, *p.secondary_opts) for p in command.params
                            if isinstance(p, click.Option)))
    if not takers:
        return ""
    parent = exc.ctx.parent.command_path
    named = " and ".join(f"`{parent} {name}`" for name in takers)
    return f"{exc.option_name} is not an option of `{exc.ctx.command_path}`, only of {named}"


def _command_in(group: click.Group, argv: Sequence[str]) -> tuple[click.Command, str]:
    """The command argv names and its path (`livecam models download`), else the group itself."""
    command: click.Command = group
    path = "livecam"
    for word in argv:
        sub = command.commands.get(word) if isinstance(command, click.Group) else None
        if sub is not None:
            command, path = sub, f"{path} {word}"
    return command, path


def missing_value(group: click.Group, argv: Sequence[str], exc: click.UsageError) -> str:
    """For a flag left without its value (`livecam image in.jpg out.png -s`: "Option '-s' requires
    an argument.", with no word on what it takes): the flag with what goes after it; else ''."""
    if not isinstance(exc, click.BadOptionUsage) or "requires" not in exc.format_message():
        return ""
    command, path = _command_in(group, argv)
    param = next((p for p in command.params if isinstance(p, click.Option) and exc.option_name in p.opts), None)
    if param is None:
        return ""
    flag, help_hint = exc.option_name, f" (see `{path} --help`)"
    if isinstance(param.type, click.Choice) and not param.metavar:
        choices = ", ".join(map(str, param.type.choices))
        return f"{flag} is missing its value: give one of {choices} right after it{help_hint}"
    kind = param.type.name.upper().replace(" RANGE", "")
    what = param.metavar or {"FLOAT": "NUMBER", "INTEGER": "NUMBER"}.get(kind, kind)
    return f"{flag} is missing its {what}: give it right after the flag, `{flag} {what}`{help_hint}"


def dash_name(argv: Sequence[str], exc: click.UsageError) -> str:
    """For a file name starting with a dash (`-out.jpg`), which click reads as options (`-o`):
    how to give it; else ''."""
    if not isinstance(exc, click.NoSuchOption) or not exc.option_name or exc.option_name.startswith("--"):
        return ""
    for word in argv:
        if word.startswith(exc.option_name) and len(word) > 2 and "." in word[2:]:
            return f"{word!r} starts with a dash, so it is read as options; give it as ./{word}"
    return ""


# The flags other face swappers (roop, Deep-Live-Cam) take for the files: `-s FACE -t TARGET -o OUTPUT`.
_FILE_FLAGS = ("-t", "--target", "-i", "--input", "-o", "--output")


def _file_arguments(exc: click.UsageError) -> str:
    """How a command that takes its input and output as arguments (image, video) is given them; '' for the others."""
    if exc.ctx is None:
        return ""
    names = [p.human_readable_name for p in exc.ctx.command.params if isinstance(p, click.Argument)]
    return f"`{exc.ctx.command_path} INPUT OUTPUT --source FACE.jpg`" if names == ["INPUT", "OUTPUT"] else ""


def arguments_usage(exc: click.UsageError) -> str:
    """For `-t TARGET` or `-o OUTPUT` given to a command that takes its input and output as
    arguments (image, video): how to give them; else ''."""
    example = _file_arguments(exc)
    if not isinstance(exc, click.NoSuchOption) or exc.option_name not in _FILE_FLAGS or not example or exc.ctx is None:
        return ""
    return f"`{exc.ctx.command_path}` takes the input and the output as arguments, without a flag: {example}"


def missing_file(exc: click.UsageError) -> str:
    """For INPUT or OUTPUT left out ("Missing argument 'OUTPUT'." said nothing of where it goes,
    nor that the face is not one of them): the order; else ''."""
    example = _file_arguments(exc)
    if not isinstance(exc, click.MissingParameter) or not isinstance(exc.param, click.Argument) or not example:
        return ""
    return f"give the file to read and the file to write, in that order: {example}"


def usage_message(group: click.Group, argv: Sequence[str], strays: Sequence[tuple[str, str]],
                  exc: click.UsageError) -> str:
    """click's usage error as livecam's one line (its own is three), with how to fix it where the
    mistake is a known one."""
    where = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
    message = exc.format_message()
    moved = (dash_name(argv, exc) or global_usage(group, exc) or command_usage(group, argv, exc)
             or arguments_usage(exc))
    if moved:  # `livecam run ... --offline` only said "No such option", or guessed an unrelated option
        message, where = message.split(" Did you mean", 1)[0].rstrip("."), f"; {moved}"
    elif sibling_usage(exc):  # click's guess among this command's own options was beside the point
        message = sibling_usage(exc)
    if missing_file(exc):
        message = f"{message.rstrip('.')}; {missing_file(exc)}"
    if exc.ctx is not None and exc.ctx.command.name == "image" and message.startswith("Got unexpected extra"):
        # `livecam image *.jpg out/ -s face.jpg`, or the face given as an argument
        where = ("; `livecam image` takes one INPUT image and one OUTPUT file, with the face photo after "
                 "--source: run it once per image")
    if (exc.ctx is not None and isinstance(exc.ctx.command, click.Group) and message.startswith("No such command")
            and "Did you mean" not in message):  # `livecam swap`: which words it takes
        commands = sorted(exc.ctx.command.commands)
        where = f"; the commands are {', '.join(commands[:-1])} and {commands[-1]} (see `{exc.ctx.command_path} --help`)"
        message = message.rstrip(".")
    return mistyped_variadic_value(strays) or missing_value(group, argv, exc) or f"{message}{where}"
