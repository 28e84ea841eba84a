"""Reading a user's suite and result files with bounded cost: size first, then the parse.

A file is checked before it is parsed, never after: a 17.7 MB YAML suite took 132 s to parse
before a size check refused it, and JSON parsing amplifies (three bytes of ``[],`` become a
56-byte list: a 32 MB results file took 2.8 GB). So each file is bounded twice before the parser
sees it, as a remote's documents are (``remotes/_limits.py``): by its bytes (a ``stat``) and by
the JSON values it could hold, counted as its ``{``, ``[`` and ``,`` bytes (one pass in C). What
the parser itself can raise (a number of more than 4300 digits, nesting deeper than Python's
recursion limit, bytes that are not UTF-8) becomes one line naming the file. The limits are
documented in docs/suites.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import UsageError

# A suite is a few KiB (the reference suites are under 1 KiB); PyYAML reads about 1 MiB a second.
MAX_SUITE_BYTES = 1 << 20
# A results file: a VisBench record is ~400 bytes and ~30 values, a Visin file a value per
# condition, class and metric. 2 million values parse to at most a few hundred MiB.
MAX_RESULTS_BYTES = 64 << 20
MAX_RESULTS_VALUES = 2_000_000


def read_text(path: str | Path, what: str, limit: int, hint: str) -> str:
    """The UTF-8 text of a ``what`` file no larger than ``limit`` bytes (checked before reading).

    Raises:
        UsageError: unreadable, over ``limit``, or not UTF-8 (naming the first bad byte).
    """
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > limit:
            raise UsageError(f"{file.name} is {_size(size)}, over the {_size(limit)} a {what} "
                             "may be; nothing was read", hint=hint)
        with file.open("rb") as handle:
            data = handle.read(limit + 1)  # a file grown since the stat stays bounded
    except OSError as exc:
        raise UsageError(f"cannot read the {what} {file}: {exc.strerror}") from None
    if len(data) > limit:
        raise UsageError(f"{file.name} is over the {_size(limit)} a {what} may be")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{file.name} is not UTF-8 text (byte {exc.start} is "
                         f"{data[exc.start:exc.start + 1]!r})",
                         hint=f"save the {what} as UTF-8") from None


def check_values(text: str, name: str, limit: int) -> None:
    """Refuse ``text`` before it is parsed when it could hold more than ``limit`` JSON values.

    Raises:
        UsageError: naming the file and the limit.
    """
    count = text.count("{") + text.count("[") + text.count(",")
    if count > limit:
        raise UsageError(f"{name} could hold {count} JSON values, over the {limit} allowed; "
                         "nothing was parsed", hint="split it into several files")


def loads(text: str, name: str) -> Any:
    """``json.loads`` whose every failure is one line naming ``name``.

    Raises:
        UsageError: not JSON, a number Python refuses to convert, or nested too deeply.
    """
    try:
        return json.loads(text)
    except RecursionError:
        raise UsageError(f"{name} is nested too deeply to be read") from None
    except ValueError as exc:  # JSONDecodeError, and int() over sys.get_int_max_str_digits()
        raise UsageError(f"{name} is not valid JSON: {_short(exc)}") from None


def _short(exc: Exception) -> str:
    text = str(exc)
    return text if len(text) <= 160 else text[:157] + "..."


def _size(nbytes: int) -> str:
    return f"{nbytes / (1 << 20):.3g} MiB" if nbytes >= 1 << 20 else f"{nbytes} bytes"
