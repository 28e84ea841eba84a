"""Visin's run metadata as flags, for ``evaluate`` and ``import results``: ``--project``,
``--run``, ``--epoch`` (in the evaluation document) and ``--uuid`` (the upload's name, in the
registry); vbstore.suites._evaluate says why each is where it is."""

from __future__ import annotations

import functools

import click


def run_metadata_options(func):
    """The four flags, passed to the command as ``run_metadata`` (a dict)."""
    options = [
        click.option("--project", default=None,
                     help="The project it is recorded in (Visin's); `leaderboard --project` "
                          "ranks within one. Part of the evaluation: another project, another "
                          "evaluation."),
        click.option("--run", "run_id", default=None, metavar="ID",
                     help="The training run the checkpoint came from (Visin's training UUID; "
                          "provenance, kept in the evaluation)."),
        click.option("--epoch", type=click.IntRange(min=0), default=None,
                     help="The epoch the checkpoint was saved at (provenance, kept in the "
                          "evaluation)."),
        click.option("--uuid", default=None,
                     help="Your id for this upload: sending the same evaluation again returns "
                          "the stored one; a different one under it is refused (exit 11)."),
    ]

    @functools.wraps(func)  # keeps the options already attached (click's __click_params__)
    def collect(*args, project, run_id, epoch, uuid, **kwargs):
        kwargs["run_metadata"] = {"project": project, "run": run_id, "epoch": epoch,
                                  "uuid": uuid}
        return func(*args, **kwargs)

    for option in reversed(options):
        collect = option(collect)
    return collect
