"""``vbstore evaluate``: judge stored results, or results computed elsewhere with Visin's
evidence flags, on a suite, and record the evaluation."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .. import suites
from ..errors import EXIT_NOT_RANKED, UsageError
from ._common import emit, json_option, with_store
from ._runmeta import run_metadata_options
from .suite_cmds import _counts, _print_evaluation


def _visin_checkpoint(checkpoint, label, hub_repo, hub_commit, weights):
    """The checkpoint ``--checkpoint``/``--hub-repo`` name (Visin's flags), or None."""
    if checkpoint and hub_repo:
        raise UsageError("give --checkpoint (a file here) or --hub-repo, not both")
    kind = weights or "checkpoint"
    if checkpoint:
        return suites.file_checkpoint(checkpoint, label, kind)
    if hub_repo:
        if not hub_commit:
            raise UsageError("--hub-repo needs --hub-commit: the full 40-character commit")
        return suites.hub_checkpoint(hub_repo, hub_commit, label, kind)
    return None


def _sample_counts(counts, counts_file) -> dict[str, int]:
    out: dict[str, int] = {}
    if counts_file:
        try:
            loaded = json.loads(Path(counts_file).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read --sample-counts {counts_file}: {exc}") from None
        if not isinstance(loaded, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in loaded.values()
        ):
            raise UsageError('--sample-counts should hold an object like {"day": 1200}')
        out.update(loaded)
    return {**out, **_counts(counts)}


_WEIGHTS = click.Choice(["pretrained", "fixed", "checkpoint", "random", "unknown"])


@click.command("evaluate")
@click.argument("results", nargs=-1, required=True, metavar="[CONDITION=]RESULT... | FILE.json")
@click.option("--suite", "suite_ref", required=True, help="The suite, slug@version.")
@click.option("--checkpoint", type=click.Path(dir_okay=False), default=None,
              help="Results from elsewhere: the weights file that was loaded (its SHA-256 names "
                   "it).")
@click.option("--label", default=None, help="A name for --checkpoint (default: the file name).")
@click.option("--hub-repo", default=None, help="Or: the checkpoint's Hub repo, org/name.")
@click.option("--hub-commit", default=None, help="The full 40-character commit of --hub-repo.")
@click.option("--weights", type=_WEIGHTS, default=None,
              help="The weights kind of --checkpoint/--hub-repo (default: checkpoint).")
@click.option("--sample-count", "counts", multiple=True, metavar="NAME=N",
              help="Samples scored in a condition; repeat for each.")
@click.option("--sample-counts", "counts_file", type=click.Path(dir_okay=False), default=None,
              help='The counts as a JSON object, {"day": 1200}.')
@click.option("--data", "data_text", default=None, metavar="KIND=VALUE",
              help="The data read: external=<manifest sha256>, visin=<archive sha256> or "
                   "hf=org/name@<commit>.")
@click.option("--protocol", "protocol_file", type=click.Path(dir_okay=False), default=None,
              help="The suite or protocol file that was run (its digest is compared).")
@click.option("--protocol-digest", default=None, help="The digest of the protocol that was run.")
@click.option("--evaluator-package", default=None, help="What produced the numbers.")
@click.option("--evaluator-version", default=None)
@click.option("--evaluator-commit", default=None)
@click.option("--classes-scored", default=None, help="Comma-separated classes scored.")
@click.option("--classes-ignored", default=None, help="Comma-separated classes left out.")
@click.option("--supersedes", default=None,
              help="The evaluation this one corrects: it leaves the ranking, kept as an attempt.")
@click.option("--dry-run", is_flag=True, help="Store nothing; print the verdict.")
@click.option(
    "--require-ranked", is_flag=True, help="Exit 3 when the evaluation is recorded but not ranked."
)
@run_metadata_options
@json_option
@with_store
def evaluate(store, results, suite_ref, checkpoint, label, hub_repo, hub_commit, weights, counts,
             counts_file, data_text, protocol_file, protocol_digest, evaluator_package,
             evaluator_version, evaluator_commit, classes_scored, classes_ignored, supersedes,
             dry_run, require_ranked, run_metadata, as_json) -> None:
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
    visin = _visin_checkpoint(checkpoint, label, hub_repo, hub_commit, weights)
    external = len(results) == 1 and results[0].lower().endswith(".json") \
        and Path(results[0]).is_file()
    if external:
        if visin is None:
            raise UsageError(f"{results[0]} is results computed elsewhere: say which weights",
                             hint="--checkpoint FILE (its SHA-256), or --hub-repo and --hub-commit")
        evaluator = {k: v for k, v in (("package", evaluator_package),
                                       ("version", evaluator_version),
                                       ("commit", evaluator_commit)) if v}
        kwargs = suites.external_evidence(
            suites.read_visin_results(results[0]),
            checkpoint=visin,
            source={"format": "visin", "file": Path(results[0]).name},
            sample_counts=_sample_counts(counts, counts_file),
            data=suites.parse_data(data_text) if data_text else None,
            protocol=suites.protocol_evidence(protocol_file, protocol_digest),
            evaluator=evaluator,
            classes=suites.classes_evidence(classes_scored, classes_ignored),
            supersedes=supersedes,
        )
        doc = suites.build(suite, **kwargs, **run_metadata)
    else:
        given = [flag for flag, value in (
            ("--checkpoint/--hub-repo", visin), ("--sample-count", counts or counts_file),
            ("--data", data_text), ("--protocol", protocol_file or protocol_digest),
            ("--evaluator-*", evaluator_package or evaluator_version or evaluator_commit),
            ("--classes-*", classes_scored or classes_ignored), ("--weights", weights),
        ) if value]
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
