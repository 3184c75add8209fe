"""The click parameter types of livecam's options: a choice read from the processor registry, a
float range without nan or inf, an optional SIZE 0..100, and a path that is never empty and has ~
expanded; and `option`, every option's declaration, which refuses two values of a one-value option."""

from __future__ import annotations

import difflib
import errno
import math
import os
import stat
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

import click

from livecam.processors import registry

F = TypeVar("F", bound=Callable[..., Any])


class GuessedChoice(click.Choice):
    """click.Choice that names the choice a mistyped value is close to: `--frame-processor face_swaper`
    and `--swap-model inswapper` were only told every choice."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            choices = [str(c) for c in self.choices]
            typed = str(value) if self.case_sensitive else str(value).lower()
            listed = [word.strip() for word in typed.split(",")]
            if isinstance(param, click.Option) and param.multiple and len(listed) > 1 and all(w in choices for w in listed):
                flag = max(param.opts, key=len)  # `--execution-provider cuda,cpu` was "did you mean cuda?"
                self.fail(f"{value!r}: give the values as separate words, {flag} {' '.join(listed)}", param, ctx)
            close = difflib.get_close_matches(typed, choices, n=1, cutoff=0.6)
            if not close:
                raise
            self.fail(f"{value!r} is not one of {', '.join(choices)}; did you mean {close[0]}?", param, ctx)


class ProcessorChoice(GuessedChoice):
    """--frame-processor's choices: the registered processors, looked up on first use (finding
    them imports the processor modules, which --help and `livecam models` need not pay for)."""

    def __init__(self) -> None:
        super().__init__(())

    @property  # type: ignore[override]
    def choices(self) -> Sequence[str]:
        return registry.names()

    @choices.setter
    def choices(self, value: Sequence[str]) -> None:
        pass  # click.Choice.__init__ assigns; the registry is the one source


class FiniteRange(click.FloatRange):
    """click.FloatRange that also refuses nan and inf: they pass its comparisons, and went on
    to fail deep in a run as an internal error (--fps nan, --max-memory inf)."""

    name = "float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class OptionalSize(click.IntRange):
    """An option's optional SIZE 0..100 (--mouth-mask [SIZE]): the word after the flag is taken as
    it whenever it does not start with a dash, so `--mouth-mask in.jpg out.jpg` took the input as
    the size and said "'in.jpg' is not a valid integer range"."""

    def __init__(self) -> None:
        super().__init__(0, 100)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            int(value)
        except (TypeError, ValueError):
            flag = param.opts[0] if param is not None else "the option"
            files = ctx is not None and any(isinstance(p, click.Argument) for p in ctx.command.params)
            self.fail(f"{value!r} is not a SIZE from 0 to 100; {flag} takes the word after it as its SIZE, so "
                      f"give one ({flag} 0)" + (f" or put {flag} after the files" if files else ""), param, ctx)
        return super().convert(value, param, ctx)


class NamesItsVariable(click.ParamType):
    """A refused value that came from an environment variable names it (LIVECAM_MODELS_DIR naming a
    file, LIVECAM_OFFLINE=maybe, said only "Invalid value for '--models-dir'" or '--offline', options
    the user never typed). Subclasses convert in _convert."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return self._convert(value, param, ctx)
        except click.BadParameter as exc:
            source = ctx.get_parameter_source(param.name) if ctx is not None and param is not None and param.name \
                else None
            envvar = getattr(param, "envvar", None)
            if source is click.core.ParameterSource.ENVIRONMENT and isinstance(envvar, str):
                raise click.BadParameter(f"{exc.message} (from ${envvar})", ctx, param) from None
            raise

    def _convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return super().convert(value, param, ctx)  # the click type after this one


class EnvFlag(NamesItsVariable, click.types.BoolParamType):
    """An on/off flag also set by an environment variable (--offline, LIVECAM_OFFLINE=1)."""

    def _convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super()._convert(value, param, ctx)
        except click.BadParameter:  # click's list of what it takes began with an empty string
            self.fail(f"{value!r} is neither on nor off; give 1 (or yes, true, on) or 0 (or no, false, off)",
                      param, ctx)


class GivenPath(NamesItsVariable, click.Path):
    """click.Path that refuses an empty value: Path("") is the current folder, so an unset shell
    variable (`livecam video "$IN" out/`) ran on every video there, and `demo ""` wrote into it."""

    def _convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value:  # (click takes an empty environment variable for unset)
            self.fail("the path is empty (an unset shell variable?); give a file or folder name", param, ctx)
        if isinstance(value, str):
            value = home_expanded(value)
        if isinstance(value, (str, Path)):
            try:
                is_dir = stat.S_ISDIR(os.stat(value).st_mode)
            except OSError as exc:  # the path checks below every command raised it: an internal error
                if exc.errno == errno.ENAMETOOLONG:
                    self.fail(too_long(os.fspath(value)), param, ctx)
            else:  # click's own words ("Directory 'x' is a file.") named no fix
                if is_dir and not self.dir_okay:
                    self.fail(f"{os.fspath(value)!r} is a folder, not a file; give a file name", param, ctx)
                if not is_dir and not self.file_okay:
                    self.fail(f"{os.fspath(value)!r} is a file, not a folder; give the name of a folder", param, ctx)
        return click.Path.convert(self, value, param, ctx)  # (super() is NamesItsVariable: it calls this)


class NameOrPath(click.ParamType):
    """`run`'s --camera and --output: a keyword, index or URL, or a file name. A file name has ~
    expanded, and one longer than the file system allows is refused as GivenPath refuses it (it
    was "internal error: OSError: [Errno 36] File name too long")."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        value = home_expanded(str(value))
        if "://" in value:  # a URL: a long token in it is no file name
            return value
        try:
            os.stat(value)
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                self.fail(too_long(value), param, ctx)
        return value


def too_long(value: str) -> str:
    """What is said of a name longer than the file system allows (ENAMETOOLONG)."""
    longest = max(len(os.fsencode(part)) for part in Path(value).parts)
    return (f"the name is longer than the file system allows ({longest} bytes in one part, "
            f"{len(os.fsencode(value))} in all; the usual limits are 255 and 4096); give a shorter one")


def home_expanded(value: str) -> str:
    """`value` with a leading ~ or ~user as the shell expands it. The shell leaves it as it is after
    `=` (`--source=~/face.jpg`) or in quotes: the file was "not found" and an output's folder "~
    does not exist; create it first", which made a folder named ~ in the current one."""
    return os.path.expanduser(value)


# The parser actions that keep every occurrence of an option, for the one that keeps the last.
_APPENDING = {"store": "append", "store_const": "append_const"}


class _EveryOccurrence:
    """The parser as OnceOption adds itself to it: each occurrence appended, not the last stored."""

    def __init__(self, parser: Any) -> None:
        self._parser = parser

    def add_option(self, **kwargs: Any) -> None:
        kwargs["action"] = _APPENDING.get(kwargs["action"], kwargs["action"])
        self._parser.add_option(**kwargs)


class OnceOption(click.Option):
    """An option that takes one value refuses two different ones: click keeps the last without a
    word, so `--blend 0.5 --blend 0.9` ran at 0.9 and `--label --no-label` unlabelled. The same
    value twice (a command line built by a script, an alias plus the full flag) is that value."""

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        if self.multiple or self.count:  # (--source, --map; -vv): each occurrence is meant
            super().add_to_parser(parser, ctx)
        else:
            super().add_to_parser(_EveryOccurrence(parser), ctx)  # type: ignore[arg-type]

    def handle_parse_result(self, ctx: click.Context, opts: Any, args: list[str]) -> Any:
        given = opts.get(self.name) if self.name else None
        if isinstance(given, list) and not (self.multiple or self.count):
            if not ctx.resilient_parsing:
                self._check_once(ctx, given)
            opts = {**opts, self.name: given[-1]}
        return super().handle_parse_result(ctx, opts, args)

    def _check_once(self, ctx: click.Context, given: list[Any]) -> None:
        # a --mouth-mask without its optional SIZE comes as click's marker for "no value"
        raw = [v if self.is_flag or isinstance(v, (str, tuple, list)) else self.flag_value for v in given]
        distinct = list(dict.fromkeys(tuple(v) if isinstance(v, list) else v for v in raw))
        if len(distinct) < 2 or len(set(self._meanings(ctx, distinct))) < 2:
            return
        flag = max(self.opts, key=len)  # the long name (-o is also --output)
        if self.is_flag and self.secondary_opts and set(distinct) == {True, False}:
            raise click.UsageError(f"{flag} and {max(self.secondary_opts, key=len)} are both given: "
                                   "keep the one you mean", ctx)
        shown = [" ".join(map(str, v)) if isinstance(v, tuple) else str(v) for v in distinct]
        values = ", ".join(shown[:-1]) + f" and {shown[-1]}"
        times = "twice" if len(given) == 2 else f"{len(given)} times"
        raise click.UsageError(f"{flag} is given {times} ({values}) and takes one value: keep the one you mean",
                               ctx)

    def _meanings(self, ctx: click.Context, values: list[Any]) -> list[Any]:
        """The values as the option reads them (0.5 and .5 are one blend), or as typed where one
        is no value of the option (that is said when the one kept is refused)."""
        try:
            return [repr(self.type_cast_value(ctx, v)) for v in values]
        except click.BadParameter:
            return values


def option(*decls: str, **attrs: Any) -> Callable[[F], F]:
    """click.option, refusing two different values of an option that takes one (OnceOption)."""
    return click.option(*decls, cls=OnceOption, **attrs)
