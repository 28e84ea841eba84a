"""What every command shares: the store option, --json, error handling, size and time parsing."""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import warnings
from collections.abc import Callable
from typing import Any, TextIO

import click

from ..errors import UsageError, VbstoreError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)i?b?\s*$", re.IGNORECASE)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def one_line_warnings() -> None:
    """Print vbstore's own warnings as ``warning: MESSAGE`` lines on stderr, as the CLI's other
    warnings read, not as Python's file:line report (VBSTORE_DEBUG=1 keeps Python's)."""
    if os.environ.get("VBSTORE_DEBUG") or getattr(warnings.showwarning, "vbstore", False):
        return
    python_show = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        if category.__module__.split(".")[0] != "vbstore":
            python_show(message, category, filename, lineno, file, line)
            return
        click.echo(f"warning: {message}", err=True)

    show.vbstore = True  # type: ignore[attr-defined]
    warnings.showwarning = show


def parse_size(text: str) -> int:
    """``"10G"`` → 10 * 1024**3. Binary units; a bare number is bytes."""
    match = _SIZE.match(text)
    if not match:
        raise click.BadParameter(f"{text!r} is not a size; use e.g. 500M, 10G or 123456")
    power = "kmgtp".find(match.group(2).lower()) + 1 if match.group(2) else 0
    return int(float(match.group(1)) * 1024**power)


def parse_duration(text: str) -> float:
    """``"1h"`` → 3600.0; a bare number is seconds."""
    match = _DURATION.match(text)
    if not match:
        raise click.BadParameter(f"{text!r} is not a duration; use e.g. 0, 90s, 30m, 1h, 2d")
    return float(match.group(1)) * _UNITS[match.group(2).lower()]


def human_size(size: int | float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def get_store(ctx: click.Context):
    """The Store for this invocation, opened once (``--store``, else VBSTORE_HOME, else default)."""
    # the store (sqlite3, blake3) loads when a command opens it, not for --help
    from ..store import Store

    root = ctx.find_root()
    if root.obj is None:
        root.obj = {}
    if "store" not in root.obj:
        root.obj["store"] = Store(root.params.get("store"))
        root.call_on_close(root.obj["store"].close)
    return root.obj["store"]


def emit(ctx_json: bool, data: Any, text: Callable[[], None] | str | None = None) -> None:
    """Print ``data`` as JSON when --json was given, else the human form."""
    if ctx_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))
    elif callable(text):
        text()
    elif text is not None:
        click.echo(text)


def json_option(func: Callable) -> Callable:
    """Add ``--json`` to a command."""
    option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
    return option(func)


def output_option(func: Callable) -> Callable:
    """Add ``--output/-o FILE`` to a command that otherwise writes to stdout."""
    option = click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
                          help="Write here (default: stdout).")
    return option(func)


def with_store(func: Callable) -> Callable:
    """Pass the store as the first argument of a command."""

    @functools.wraps(func)
    @click.pass_context
    def wrapper(ctx: click.Context, *args: Any, **kwargs: Any) -> Any:
        return func(get_store(ctx), *args, **kwargs)

    return wrapper


def summary_of(command: click.Command) -> str:
    """A command's summary: its short help, else the first sentence of its help, uncut."""
    if command.short_help:
        return " ".join(command.short_help.split())
    first = (command.help or "").strip().split("\n\n")[0]
    text = " ".join(first.split())
    end = text.find(". ")
    return text[: end + 1] if end >= 0 else text


def _name_task_param(exc: click.NoSuchOption) -> click.UsageError:
    """``--num-classes`` on a command with ``-p``: the error that says it is task parameter
    ``num_classes`` (click would suggest a flag that merely looks alike, such as ``--classes``);
    ``exc`` itself for any other flag."""
    ctx = exc.ctx
    if ctx is None or not any("-p" in getattr(p, "opts", ()) for p in ctx.command.params):
        return exc
    name = exc.option_name.lstrip("-").replace("-", "_")
    from ..tasks import get_task, list_tasks  # only on this error path

    owners = [t for t in list_tasks() if name in get_task(t).params]
    if not owners:
        return exc
    return click.UsageError(f"No such option '{exc.option_name}': {name} is a task parameter "
                            f"({', '.join(owners[:4])}{', ...' if len(owners) > 4 else ''}): "
                            f"give it as -p {name}=VALUE", ctx=ctx)


class VbstoreGroup(click.Group):
    """A group that turns a known error into one line and its documented exit code."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:
            # click suggests from self.commands, which is empty in a group whose commands are
            # made on demand (the root, `run`): suggest from list_commands instead
            raise click.exceptions.NoSuchCommand(
                exc.command_name, possibilities=self.list_commands(ctx), ctx=ctx
            ) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each command with its whole summary, wrapped: click would cut it with "..." to fit
        one line."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, summary_of(command)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        # the subcommand's own --json is not parsed yet when its error reaches us
        as_json = "--json" in ctx.args
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except click.NoSuchOption as exc:
            named = _name_task_param(exc)
            if not as_json:
                if named is exc:
                    raise
                raise named from None
            _fail(named.format_message(), named.exit_code, as_json, type(exc).__name__)
        except click.ClickException as exc:
            if not as_json:
                raise
            _fail(exc.format_message(), exc.exit_code, as_json, type(exc).__name__)
        except VbstoreError as exc:
            message = str(exc.args[0]) if exc.args else str(exc)
            _fail(message, exc.exit_code, as_json, type(exc).__name__, exc.hint)
        except KeyboardInterrupt:
            _fail("interrupted; the store is unchanged by the unfinished step", 130, as_json,
                  "KeyboardInterrupt")
        except BrokenPipeError:
            # the reader went away (`vbstore ls | head`): not an error; keep exit quiet
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(0)
        except OSError as exc:
            _fail(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), 7, as_json,
                  type(exc).__name__)


def _fail(message: str, code: int, as_json: bool = False, kind: str = "", hint: str = "") -> None:
    """Print one error line (with --json: one JSON object on stdout) and exit with ``code``."""
    if os.environ.get("VBSTORE_DEBUG"):
        raise
    if as_json:
        click.echo(json.dumps({"error": message, "hint": hint, "exit_code": code, "type": kind},
                              sort_keys=True))
    else:
        click.echo(f"error: {message}; {hint}" if hint else f"error: {message}", err=True)
    sys.exit(code)


def refuse(message: str, hint: str) -> None:
    raise UsageError(message, hint=hint)
