"""``vbstore evaluate``: judge stored results, or results computed elsewhere with Visin's
evidence flags, on a suite, and record the evaluation."""

from __future__ import annotations

import functools
import json
import sys
from dataclasses import dataclass, fields
from pathlib import Path

import click

from .. import suites
from ..errors import EXIT_NOT_RANKED, UsageError
from ._common import emit, json_option, with_store
from ._runmeta import run_metadata_options
from .suite_cmds import _counts, _print_evaluation


@dataclass(frozen=True)
class Evidence:
    """What Visin's evidence flags say of results computed elsewhere (all None: none given)."""

    checkpoint: str | None
    label: str | None
    hub_repo: str | None
    hub_commit: str | None
    weights: str | None
    counts: tuple[str, ...]
    counts_file: str | None
    data_text: str | None
    protocol_file: str | None
    protocol_digest: str | None
    evaluator_package: str | None
    evaluator_version: str | None
    evaluator_commit: str | None
    classes_scored: str | None
    classes_ignored: str | None

    def visin_checkpoint(self):
        """The checkpoint ``--checkpoint``/``--hub-repo`` name (Visin's flags), or None."""
        if self.checkpoint and self.hub_repo:
            raise UsageError("give --checkpoint (a file here) or --hub-repo, not both")
        kind = self.weights or "checkpoint"
        if self.checkpoint:
            return suites.file_checkpoint(self.checkpoint, self.label, kind)
        if self.hub_repo:
            if not self.hub_commit:
                raise UsageError("--hub-repo needs --hub-commit: the full 40-character commit")
            return suites.hub_checkpoint(self.hub_repo, self.hub_commit, self.label, kind)
        return None

    def sample_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        if self.counts_file:
            try:
                loaded = json.loads(Path(self.counts_file).read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise UsageError(f"cannot read --sample-counts {self.counts_file}: {exc}") \
                    from None
            if not isinstance(loaded, dict) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in loaded.values()
            ):
                raise UsageError('--sample-counts should hold an object like {"day": 1200}')
            out.update(loaded)
        return {**out, **_counts(self.counts)}

    def evaluator(self) -> dict[str, str]:
        return {k: v for k, v in (("package", self.evaluator_package),
                                  ("version", self.evaluator_version),
                                  ("commit", self.evaluator_commit)) if v}

    def given(self) -> list[str]:
        """The evidence flags given, beside a checkpoint (which only results from elsewhere
        take)."""
        return [flag for flag, value in (
            ("--sample-count", self.counts or self.counts_file), ("--data", self.data_text),
            ("--protocol", self.protocol_file or self.protocol_digest),
            ("--evaluator-*", self.evaluator_package or self.evaluator_version
             or self.evaluator_commit),
            ("--classes-*", self.classes_scored or self.classes_ignored),
            ("--weights", self.weights),
        ) if value]


def evidence_options(func):
    """Visin's evidence flags; the command receives them as one :class:`Evidence`."""
    names = [f.name for f in fields(Evidence)]

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, evidence=Evidence(**{name: kwargs.pop(name) for name in names}),
                    **kwargs)

    for option in reversed(_EVIDENCE):
        wrapper = option(wrapper)
    return wrapper


_WEIGHTS = click.Choice(["pretrained", "fixed", "checkpoint", "random", "unknown"])


_EVIDENCE = [
    click.option("--checkpoint", type=click.Path(dir_okay=False), default=None,
                 help="Results from elsewhere: the weights file that was loaded (its SHA-256 "
                      "names it)."),
    click.option("--label", default=None, help="A name for --checkpoint (default: the file name)."),
    click.option("--hub-repo", default=None, help="Or: the checkpoint's Hub repo, org/name."),
    click.option("--hub-commit", default=None, help="The full 40-character commit of --hub-repo."),
    click.option("--weights", type=_WEIGHTS, default=None,
                 help="The weights kind of --checkpoint/--hub-repo (default: checkpoint)."),
    click.option("--sample-count", "counts", multiple=True, metavar="NAME=N",
                 help="Samples scored in a condition; repeat for each."),
    click.option("--sample-counts", "counts_file", type=click.Path(dir_okay=False), default=None,
                 help='The counts as a JSON object, {"day": 1200}.'),
    click.option("--data", "data_text", default=None, metavar="KIND=VALUE",
                 help="The data read: external=<manifest sha256>, visin=<archive sha256> or "
                      "hf=org/name@<commit>."),
    click.option("--protocol", "protocol_file", type=click.Path(dir_okay=False), default=None,
                 help="The suite or protocol file that was run (its digest is compared)."),
    click.option("--protocol-digest", default=None,
                 help="The digest of the protocol that was run."),
    click.option("--evaluator-package", default=None, help="What produced the numbers."),
    click.option("--evaluator-version", default=None),
    click.option("--evaluator-commit", default=None),
    click.option("--classes-scored", default=None, help="Comma-separated classes scored."),
    click.option("--classes-ignored", default=None, help="Comma-separated classes left out."),
]


@click.command("evaluate")
@click.argument("results", nargs=-1, required=True, metavar="[CONDITION=]RESULT... | FILE.json")
@click.option("--suite", "suite_ref", required=True, help="The suite, slug@version.")
@evidence_options
@click.option("--supersedes", default=None,
              help="The evaluation this one corrects: it leaves the ranking, kept as an attempt.")
@click.option("--dry-run", is_flag=True, help="Store nothing; print the verdict.")
@click.option(
    "--require-ranked", is_flag=True, help="Exit 3 when the evaluation is recorded but not ranked."
)
@run_metadata_options
@json_option
@with_store
def evaluate(store, results: tuple[str, ...], suite_ref: str, evidence: Evidence,
             supersedes: str | None, dry_run: bool, require_ranked: bool, run_metadata: dict,
             as_json: bool) -> None:
    """Judge results on a suite and record the evaluation.

    Stored results: one per condition, each under the condition its eval split names, or under
    CONDITION= given. Results computed elsewhere: a Visin results FILE.json (condition -> class ->
    metric) with the evidence flags `visin evaluate` takes (--checkpoint, --sample-count, --data,
    --protocol, --evaluator-*, --classes-*); what is given is compared with the suite.
    Visin's run metadata: --project, --run, --epoch (kept in the evaluation) and --uuid (a
    retried upload returns the stored evaluation; a different one under it exits 11).
    """
    uuid = run_metadata.pop("uuid")
    suite = suites.get_suite(store, suite_ref)
    visin = evidence.visin_checkpoint()
    external = len(results) == 1 and results[0].lower().endswith(".json") \
        and Path(results[0]).is_file()
    if external:
        if visin is None:
            raise UsageError(f"{results[0]} is results computed elsewhere: say which weights",
                             hint="--checkpoint FILE (its SHA-256), or --hub-repo and --hub-commit")
        kwargs = suites.external_evidence(
            suites.read_visin_results(results[0]),
            checkpoint=visin,
            source={"format": "visin", "file": Path(results[0]).name},
            sample_counts=evidence.sample_counts(),
            data=suites.parse_data(evidence.data_text) if evidence.data_text else None,
            protocol=suites.protocol_evidence(evidence.protocol_file, evidence.protocol_digest),
            evaluator=evidence.evaluator(),
            classes=suites.classes_evidence(evidence.classes_scored, evidence.classes_ignored),
            supersedes=supersedes,
        )
        doc = suites.build(suite, **kwargs, **run_metadata)
    else:
        given = ["--checkpoint/--hub-repo"] * (visin is not None) + evidence.given()
        if given:
            raise UsageError(f"{given[0]} is evidence for results computed elsewhere",
                             hint="stored results carry their own; give a results FILE.json")
        doc = suites.from_results(store, suite, suites.match_conditions(store, suite,
                                                                        list(results)))
        if supersedes:
            doc["supersedes"] = supersedes  # record checks it: same suite and checkpoint
        suites.with_run_metadata(doc, **run_metadata)
    evaluation = suites.record(store, doc, dry_run=dry_run, uuid=uuid)
    emit(as_json, evaluation.as_dict(), lambda: _print_evaluation(evaluation))
    if require_ranked and not evaluation.ranked:
        sys.exit(EXIT_NOT_RANKED)
