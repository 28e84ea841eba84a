"""The Python API's entry points: the engine's, with errors that name keyword arguments.

An engine error about a request field names the field, not a spelling (``vbstore._fields``):
the CLI prints it as its flag (``--input-size``), the default; ``vbstore.get``,
``get_result``, ``get_features``, ``get_head`` and ``run_suite`` are the engine's functions with
each such error spelled as the keyword a caller of Python passes (``input_size=``,
``params={'k': ...}``, ``data_options={'target': 'depth'}``), both from the same table row.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from . import engine
from ._fields import spell_keyword
from .errors import VbstoreError

F = TypeVar("F", bound=Callable[..., Any])


def speaks_keywords(func: F) -> F:
    """``func`` with the request fields its errors name spelled as keyword arguments."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except VbstoreError as err:
            err.spell_fields(spell_keyword)
            raise

    return wrapper  # type: ignore[return-value]


get = speaks_keywords(engine.get)
get_result = speaks_keywords(engine.get_result)
get_features = speaks_keywords(engine.get_features)
get_head = speaks_keywords(engine.get_head)


def run_suite(*args: Any, **kwargs: Any) -> Any:
    """:func:`vbstore.suites.run_suite` (score a backbone on every condition of a suite, the
    suite's way), with errors that name keyword arguments."""
    from . import suites  # the suites package loads for a caller of suites only

    return speaks_keywords(suites.run_suite)(*args, **kwargs)
