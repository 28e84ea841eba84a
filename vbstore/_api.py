"""The Python API's entry points: the engine's, with errors that speak of arguments.

The engine's messages name the command line's flags (``use --seed instead of -p seed=...``),
since most users meet them there. ``vbstore.get_result``, ``get_features`` and ``get_head`` are
the same functions, but an error they raise is reworded for a caller of Python: each flag the
API has as a keyword argument is named as that argument (``argument seed``,
``params={'k': ...}``, ``data_options={'target': 'depth'}``), so no one is told to pass a flag
to a function.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, TypeVar

from . import engine
from .errors import VbstoreError

F = TypeVar("F", bound=Callable[..., Any])

# command-line flag -> the keyword argument of the Python API that does the same
_ARGUMENTS = ("backbone", "task", "data", "train-data", "split", "train-split", "limit",
              "train-limit", "seed", "seeds", "weights", "backbone-seed", "input-size", "layers",
              "precision", "device", "head", "mode", "pooling", "batch-size", "executor",
              "finetune-blocks", "backbone-lr")
ARGUMENTS = {
    **{f"--{flag}": f"argument {flag.replace('-', '_')}" for flag in _ARGUMENTS},
    "--apply-head": "argument head", "--no-strict": "strict=False",
    "--recompute": "recompute=True",
}
# flags the API takes inside data_options, each with its value
DATA_OPTIONS = ("target", "target-type", "classes", "layout", "stems", "train-stems",
                "image-dir", "target-dir", "splits")
_OPTION = re.compile(r"(?<![\w-])--(" + "|".join(sorted(DATA_OPTIONS, key=len, reverse=True))
                     + r")(?![\w-])(?: ([^\s,;)]+))?")
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
_PARAM = re.compile(r"(?<![\w-])-p (\w+)(?:=([^\s,;)]*))?")  # "-p k" too (drop -p k)


def _option(match: re.Match[str]) -> str:
    key, value = match.group(1).replace("-", "_"), match.group(2)
    return f"data_options={{'{key}': {repr(value) if value else '...'}}}"


def as_arguments(text: str) -> str:
    """``text`` with each flag the API has as an argument named as that argument:
    ``--train-data`` -> ``argument train_data``, ``-p k=5`` -> ``params={'k': 5}``,
    ``--target depth`` -> ``data_options={'target': 'depth'}``; other flags are kept."""
    text = _PARAM.sub(lambda m: f"params={{'{m.group(1)}': {m.group(2) or '...'}}}", text)
    text = _OPTION.sub(_option, text)
    return _FLAG.sub(lambda m: ARGUMENTS.get(m.group(0), m.group(0)), text)


def speaks_arguments(func: F) -> F:
    """``func`` with the errors it raises reworded by :func:`as_arguments` (same class)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except VbstoreError as err:
            if err.args and isinstance(err.args[0], str):
                err.args = (as_arguments(err.args[0]), *err.args[1:])
            if err.hint:
                err.hint = as_arguments(err.hint)
            raise

    return wrapper  # type: ignore[return-value]


get_result = speaks_arguments(engine.get_result)
get_features = speaks_arguments(engine.get_features)
get_head = speaks_arguments(engine.get_head)


def run_suite(*args: Any, **kwargs: Any) -> Any:
    """:func:`vbstore.suites.run_suite` (score a backbone on every condition of a suite, the
    suite's way), with errors that speak of arguments."""
    from . import suites  # the suites package loads for a caller of suites only

    return speaks_arguments(suites.run_suite)(*args, **kwargs)
