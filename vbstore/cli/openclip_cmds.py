"""``vbstore import openclip`` (published tables as reported evaluations) and ``reproduce``."""

from __future__ import annotations

import sys

import click

from .. import suites
from ._common import emit, json_option, with_store
from .head_cmds import import_group
from .suite_cmds import _counts


@import_group.command("openclip")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--sample-count",
    "counts",
    multiple=True,
    metavar="DATASET=N",
    help="The test split size of a dataset vbstore does not know (voc2007, sun397, "
    "dollar_street, geode); without it that dataset is left out.",
)
@click.option("--dry-run", is_flag=True, help="Store nothing; print what would be recorded.")
@json_option
@with_store
def import_openclip(store, files, counts, dry_run, as_json) -> None:
    """Read open_clip's published results tables (docs/openclip_*results.csv; copies in
    suites/reference/) as reported evaluations, one suite per dataset (openclip-imagenet1k@1...).

    Each row is the open_clip MODEL@PRETRAINED pretrained checkpoint. The tables name no
    manifest, prompts or CLIP_benchmark version (reported evidence); the sample count is the
    dataset's test split size, given by vbstore. A 0.0000 cell is read as not evaluated and
    skipped.
    """
    given = _counts(counts)
    out = [suites.import_openclip(store, f, sample_counts=given, dry_run=dry_run) for f in files]

    def text() -> None:
        for table in out:
            info = table.as_dict()
            commit = f"open_clip {table.commit[:12]}" if table.commit else "commit unknown"
            click.echo(f"{table.file} ({commit}): {info['evaluations']} figures on "
                       f"{len(table.suites)} suites, {info['new']} new, {info['ranked']} ranked"
                       + (" (dry run: nothing stored)" if dry_run else ""))
            by_dataset: dict[str, int] = {}
            for skip in table.skipped:
                by_dataset[skip["dataset"]] = by_dataset.get(skip["dataset"], 0) + 1
            if by_dataset:  # each cell, with its line, is in --json
                cells = "cell" if len(table.skipped) == 1 else "cells"
                click.echo(f"  skipped   {len(table.skipped)} {cells} of 0.0000, read as not "
                           "evaluated: " + ", ".join(f"{d} ({n})" for d, n in by_dataset.items()))
            for column, why in table.left_out.items():
                click.echo(f"  left out  {column}: {why}")
        if out and out[0].suites:
            click.echo(f"e.g. vbstore leaderboard {out[0].suites[0]}")

    emit(as_json, [t.as_dict() for t in out], text)


@click.command("reproduce")
@click.argument("evaluation")
@click.option(
    "--tolerance",
    type=float,
    default=suites.TOLERANCE,
    show_default=True,
    help="How far (either way, in the metric's units) a score may be from the published one.",
)
@json_option
@with_store
def reproduce(store, evaluation, tolerance, as_json) -> None:
    """Compare your evaluation with the figure published for the same checkpoint on its suite
    (an imported reported evaluation): exit 0 reproduced, 12 a score differs by more than
    --tolerance, 5 a score one side lacks."""
    result = suites.reproduce(store, evaluation, tolerance=tolerance)

    def text() -> None:
        source = result.published_source
        where = f"{source.get('file', '?')} line {source.get('line', '?')}"
        click.echo(f"{result.suite}  {result.checkpoint}: your {result.candidate_evidence} run "
                   f"[{result.candidate[:12]}] against the published figure "
                   f"[{result.published[:12]}] ({where})")
        for c in result.comparisons:
            if c.status == "missing":
                click.echo(f"  {c.condition:<10} {c.metric:<28} missing (published "
                           f"{c.published}, yours {c.observed})")
            else:
                click.echo(f"  {c.condition:<10} {c.metric:<28} {c.published:.4f} -> "
                           f"{c.observed:.4f}  {c.difference:+.4f}  {c.status}")
        click.echo(f"reproduced within {tolerance}" if result.reproduced
                   else f"not reproduced within {tolerance}")

    emit(as_json, result.as_dict(), text)
    if result.exit_code:
        sys.exit(result.exit_code)
