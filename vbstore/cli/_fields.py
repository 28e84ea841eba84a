"""The request's fields as click options: each made from its row of ``vbstore._fields``.

A command lists the fields it takes (``@field_options("task", "data", ...)``) and receives each
under its keyword name, so the command line and the Python API spell the same setting from the
same row; a command's own help for a field is that row ``.but(help=...)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from .._fields import FIELDS, Field


def _type(row: Field) -> Any:
    if isinstance(row.kind, tuple):
        return click.Choice(row.kind)
    if row.kind is int and row.minimum is not None:
        return click.IntRange(min=int(row.minimum))
    if row.kind is float and row.minimum is not None:
        return click.FloatRange(min=row.minimum, max=row.maximum, min_open=row.min_open)
    return None if row.kind is str else row.kind


def field_option(row: str | Field, **click_kwargs: Any) -> Callable[[Callable], Callable]:
    """The click option of ``row`` (a row of the table, or its name); ``click_kwargs`` add what
    only the command line has (a callback)."""
    row = FIELDS[row] if isinstance(row, str) else row
    assert row.flag is not None, f"{row.name} has no flag"  # vbstore's own table
    decls = [row.flag, *([row.short] if row.short else []), row.name]
    kwargs: dict[str, Any] = {"default": row.default, "help": row.help}
    if row.kind is bool:
        kwargs["is_flag"] = True
        if row.negated:
            kwargs["flag_value"] = False
    elif _type(row) is not None and "type" not in click_kwargs:
        kwargs["type"] = _type(row)
    for name in ("show_default", "metavar", "multiple", "required"):
        if getattr(row, name):
            kwargs[name] = getattr(row, name)
    return click.option(*decls, **kwargs, **click_kwargs)


def field_options(*rows: str | Field) -> Callable[[Callable], Callable]:
    """The click options of ``rows``, in that order."""
    def decorate(func: Callable) -> Callable:
        for row in reversed(rows):
            func = field_option(row)(func)
        return func

    return decorate
