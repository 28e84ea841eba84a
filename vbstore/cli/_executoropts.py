"""``--executor`` and the Ray flags, shared by every command that may extract features."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import click

_NAMES = ("executor_name", "ray_address", "ray_sink", "ray_workers")


def executor_options(func: Callable) -> Callable:
    """Add the executor flags; the command receives ``executor`` (None: extract here)."""
    options = [
        click.option("--executor", "executor_name", type=click.Choice(["local", "ray"]),
                     default=None,
                     help="Where missing features are extracted: here (default) or on a Ray "
                          "cluster (pip install 'vbstore[ray]'); the features are identical."),
        click.option("--ray-address", default=None,
                     help="Ray cluster to use with --executor ray: auto or HOST:PORT "
                          "(default: RAY_ADDRESS, else a local Ray)."),
        click.option("--ray-sink", default=None, metavar="REMOTE",
                     help="Configured remote Ray workers write packs to (default: this store's "
                          "objects folder, which the workers must share)."),
        click.option("--ray-workers", type=click.IntRange(min=1), default=None,
                     help="Forward actors (default: one per GPU, else one per node); for "
                          "sweep, units run at once (default: all queued)."),
    ]

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given = [kwargs.pop(name) for name in _NAMES]
        if all(value is None for value in given):  # extract here: the cached path's case
            return func(*args, executor=None, **kwargs)
        from ..features import make_executor  # the Ray flags given: their checks, no torch

        return func(*args, executor=make_executor(*given), **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def progress_line(progress) -> str:
    """One line of an extraction's progress (an ``ExtractProgress``), over all its workers."""
    workers = f" over {progress.workers} workers" if progress.workers > 1 else ""
    return (f"extracting: {progress.done}/{progress.total} images, "
            f"{progress.images_per_s:.1f} images/s{workers}")


def print_progress(progress) -> None:
    """Print ``progress_line`` on stderr: rewritten in place on a terminal, else one line each."""
    if sys.stderr.isatty():
        click.echo(f"\r{progress_line(progress)}", err=True,
                   nl=progress.done >= progress.total)
    else:
        click.echo(progress_line(progress), err=True)


def progress_for(executor: Any, as_json: bool) -> bool | Callable[[Any], None]:
    """What a command passes as ``progress``: the driver's line over all Ray workers with an
    executor, else the local progress bar; both on stderr, so ``--json`` keeps them (stdout
    stays pure JSON) and ``--quiet`` turns them off."""
    del as_json  # progress goes to stderr, never into the JSON on stdout
    return print_progress if executor is not None else True
