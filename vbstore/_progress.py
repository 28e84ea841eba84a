"""Progress of long steps on stderr: a bar on a terminal, plain periodic lines otherwise.

Every long step (extracting features, training a head, scoring a dense split, pulling and
pushing blobs) reports through :func:`progress`. On a terminal that has a size it draws a tqdm
bar; anywhere else (a log file, CI, a pipe, a pseudo-terminal with no size) it writes plain
lines: the first once a step has run ``FIRST_LINE`` seconds (2, so a step that takes less writes
nothing), then one every ``VBSTORE_PROGRESS_INTERVAL`` seconds (default 10), and a last line
when a step that wrote one ends. Each line names what it works on (:func:`about`: the backbone,
then the split) before the step::

    [efficientnet_lite0 val] extracting features: image 640/1000 (12 s)
    [efficientnet_lite0] training linear head: epoch 40/100, loss 0.4123 (3 s)

Off with ``vbstore --quiet`` or ``VBSTORE_PROGRESS=0``; ``--json`` keeps it (stdout stays pure
JSON); ``VBSTORE_PROGRESS=1`` forces the lines on. The engine turns reporting on for the steps
it runs (:func:`reporting`); a task called directly from Python reports nothing unless asked.

Torch-free and cheap to import: tqdm loads only when a bar is drawn.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_ENABLED: ContextVar[bool] = ContextVar("vbstore_progress", default=False)
_ABOUT: ContextVar[tuple[str, ...]] = ContextVar("vbstore_progress_about", default=())
#: seconds before a plain line first says a step is running (then every ``interval()``)
FIRST_LINE = 2.0


def wanted() -> bool | None:
    """``VBSTORE_PROGRESS``: True (``1``), False (``0``: ``--quiet``), or None when unset."""
    value = os.environ.get("VBSTORE_PROGRESS", "").strip().lower()
    if value in ("0", "false", "no", "off"):
        return False
    return True if value else None


@contextmanager
def reporting(enabled: bool) -> Iterator[None]:
    """Steps run inside report their progress when ``enabled`` (and not turned off)."""
    token = _ENABLED.set(bool(enabled) and wanted() is not False)
    try:
        yield
    finally:
        _ENABLED.reset(token)


@contextmanager
def about(*subject: str | None) -> Iterator[None]:
    """Steps run inside name ``subject`` (a backbone, then a split) at the start of each line."""
    token = _ABOUT.set((*_ABOUT.get(), *(s for s in subject if s)))
    try:
        yield
    finally:
        _ABOUT.reset(token)


def _sized_terminal() -> bool:
    """stderr is a terminal that reports a width (a pseudo-terminal may have none: 0 columns)."""
    if not sys.stderr.isatty():
        return False
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns > 0
    except (OSError, ValueError):
        return False


def interval() -> float:
    """Seconds between two plain lines (``VBSTORE_PROGRESS_INTERVAL``, default 10)."""
    try:
        return max(0.0, float(os.environ.get("VBSTORE_PROGRESS_INTERVAL", "10")))
    except ValueError:
        return 10.0


class Progress:
    """One step's progress: ``update(n, **numbers)`` after each unit of work."""

    active = True  # a caller may skip measuring what only the display needs

    def __init__(self, desc: str, total: int, unit: str) -> None:
        self.desc, self.total, self.unit = desc, total, unit
        self.done = 0
        self.numbers: dict[str, float] = {}
        self.started = self.last = time.monotonic()
        self.lines = self.shown = 0
        self.subject = _ABOUT.get()
        self._bar: Any = None
        if _sized_terminal():
            from tqdm import tqdm  # only when a bar is drawn

            label = f"[{' '.join(self.subject)}] {desc}" if self.subject else desc
            self._bar = tqdm(total=total, unit=unit, desc=label, file=sys.stderr,
                             dynamic_ncols=True, leave=False)

    def update(self, n: int = 1, **numbers: float) -> None:
        self.done += n
        self.numbers.update(numbers)
        if self._bar is not None:
            self._bar.update(n)
            if numbers:
                self._bar.set_postfix({k: f"{v:.4g}" for k, v in numbers.items()}, refresh=False)
            return
        now = time.monotonic()
        if now - self.last >= (interval() if self.lines else min(FIRST_LINE, interval())):
            self.last = now
            self._line()

    def line(self) -> str:
        """The plain line of the step so far."""
        numbers = "".join(f", {k} {v:.4g}" for k, v in self.numbers.items())
        subject = f"[{' '.join(self.subject)}] " if self.subject else ""
        return (f"{subject}{self.desc}: {self.unit} {self.done}/{self.total}{numbers} "
                f"({time.monotonic() - self.started:.0f} s)")

    def _line(self) -> None:
        self.lines += 1
        self.shown = self.done
        print(self.line(), file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.lines and self.done != self.shown:  # a step that said it ran says it ended
            self._line()


class _Silent:
    """What :func:`progress` gives when nothing is reported."""

    active = False

    def update(self, n: int = 1, **numbers: float) -> None:
        pass


@contextmanager
def progress(desc: str, total: int, unit: str = "step") -> Iterator[Progress | _Silent]:
    """Report a step of ``total`` units, when reporting is on (:func:`reporting`)."""
    if not _ENABLED.get() or total <= 0:
        yield _Silent()
        return
    bar = Progress(desc, total, unit)
    try:
        yield bar
    finally:
        bar.close()
