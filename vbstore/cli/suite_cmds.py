"""``vbstore suite ...``, ``evaluations``, ``promote``, ``leaderboard``, ``diff``, ``import``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .. import suites
from ..errors import UsageError
from ._common import emit, json_option, output_option, with_store
from ._dataopts import data_layout_options, parse_params
from ._runmeta import run_metadata_options
from .head_cmds import import_group
from .results_cmds import export_group


def _counts(items: tuple[str, ...]) -> dict[str, int]:
    out = {}
    for name, value in suites.parse_assignments(items, "NAME=COUNT").items():
        try:
            out[name] = int(value)
        except ValueError:
            raise UsageError(f"sample count {value!r} of {name!r} is not an integer") from None
    return out


def _print_evaluation(evaluation: suites.Evaluation) -> None:
    record = evaluation.record
    where = f"[{evaluation.id[:12]}]" if evaluation.id else "(dry run)"
    click.echo(
        f"{record.suite}  {record.checkpoint['label']} "
        f"({record.checkpoint['weights']} weights)  {where}"
    )
    click.echo(f"  verdict   {record.state}")
    for reason in record.reasons:
        click.echo(f"  - {reason}")
    checked = record.verdict.get("checked")
    if checked:
        click.echo(f"  checked   {', '.join(checked)}")
    variant = record.verdict.get("variant")
    if variant:
        click.echo("  variant   " + " ".join(f"{k}={suites.show(v)}" for k, v in variant.items()))
    if record.extra.get("supersedes"):
        click.echo(f"  corrects  {record.extra['supersedes'][:12]} (it leaves the ranking)")
    if record.extra.get("project"):
        click.echo(f"  project   {record.extra['project']}")
    source = record.extra.get("run") or {}
    if source:  # Visin's provenance: where the checkpoint came from
        click.echo("  from      " + ", ".join(f"{k if k != 'id' else 'run'} {v}"
                                              for k, v in source.items()))
    missing = f" (missing: {', '.join(record.missing)})" if record.missing else ""
    click.echo(f"  evidence  {record.evidence}{missing}")
    for key, value in record.verdict["scores"]["overall"].items():
        click.echo(f"  overall   {key} {value:.4f}")
    if evaluation.id is None:
        click.echo(f"checked on {record.suite}; nothing was stored")


def _json_value(text: str):
    """``-1`` -> -1, ``[-2,-1]`` -> [-2, -1], ``cls`` -> "cls"."""
    try:
        return json.loads(text)
    except ValueError:
        return text


# ---- suite ---------------------------------------------------------------------------------


@click.group("suite")
def suite_group() -> None:
    """Suites: versioned, immutable ways of scoring (Visin's format)."""


@suite_group.command("push")
@click.argument("file", type=click.Path(dir_okay=False))
@json_option
@with_store
def suite_push(store, file, as_json) -> None:
    """Store the suite in FILE (JSON, or YAML with PyYAML) as slug@version.

    Pushing the same protocol again returns the stored suite; a different protocol under a
    published version is refused, naming the next free version.
    """
    suite, new = suites.push_suite(store, suites.read_suite_file(file))
    info = {
        "ref": suite.ref,
        "id": suite.id,
        "protocol_digest": suite.digest,
        "new": new,
        "visibility": suite.visibility,
    }
    emit(
        as_json,
        info,
        f"{suite.ref}  {suite.visibility}  protocol {suite.digest[:12]}"
        f"{'' if new else '  (already stored)'}",
    )


@suite_group.command("list")
@json_option
@with_store
def suite_list(store, as_json) -> None:
    """List stored suites."""
    rows = suites.list_suites(store)

    def text() -> None:
        for row in rows:
            click.echo(
                f"{row['ref']:<28} {row['task']:<24} "
                f"protocol {row['protocol_digest'][:12]}  {row['name']}"
            )

    emit(as_json, rows, text)


@suite_group.command("show")
@click.argument("ref")
@json_option
@with_store
def suite_show(store, ref, as_json) -> None:
    """Show suite REF (slug@version; the latest version when no @)."""
    suite = suites.get_suite(store, ref)

    def text() -> None:
        protocol = suite.protocol
        click.echo(f"{suite.ref}  {suite.name}  ({suite.visibility})")
        click.echo(f"  protocol  {suite.digest}")
        click.echo(f"  vbstore   {suite.extension_digest}  (the extension block's digest)")
        click.echo(f"  task      {protocol['task']}  {json.dumps(suite.params, sort_keys=True)}")
        pins = " ".join(f"{k}={suites.show(v)}" for k, v in sorted(suite.settings.items()))
        click.echo(f"  pinned    {pins or 'nothing: every setting varies, shown in the label'}")
        click.echo(
            f"  data      {protocol['data']['kind']} {protocol['data'].get('label', '')} "
            f"{protocol['data'].get('manifestSha256', '')}"
        )
        for c in suite.conditions:
            click.echo(f"  condition {c['name']}  {c['sampleCount']} samples")
        for m in suite.metrics:
            click.echo(
                f"  metric    {m['key']} ({m['direction']}){'  headline' if m['headline'] else ''}"
            )

    emit(as_json, {"id": suite.id, "protocol_digest": suite.digest,
                   "extension_digest": suite.extension_digest, **suite.doc}, text)


@suite_group.command("manifest")
@click.argument("splits", nargs=-1, required=True, metavar="NAME=FILE...")
@json_option
def suite_manifest(splits, as_json) -> None:
    """The manifest digest and sample counts of split files (one sample a line), as Visin has it."""
    info = suites.manifest_from_files(suites.parse_assignments(splits))

    def text() -> None:
        click.echo(f"manifestSha256  {info['manifestSha256']}")
        for c in info["conditions"]:
            click.echo(f"  {c['name']:<20}  {c['sampleCount']} samples")

    emit(as_json, info, text)


@suite_group.command("digest")
@click.argument("file", type=click.Path(dir_okay=False))
@json_option
def suite_digest(file, as_json) -> None:
    """The protocol digest of a suite FILE (canonical JSON, defaults filled in, keys sorted)."""
    doc = suites.normalize(suites.read_suite_file(file))  # a file, checked only as far as this
    digest = suites.protocol_digest(doc["protocol"])
    emit(as_json, {"protocol_digest": digest,
                   "extension_digest": suites.extension_digest(doc[suites.EXTENSION])}, digest)


@suite_group.command("new")
@click.option("--slug", required=True, help="The suite's slug (lowercase letters, digits, . _ -).")
@click.option(
    "--version",
    "version",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="The suite version.",
)
@click.option("--name", default=None, help="A human name (default: task on data).")
@click.option("--task", "-t", required=True, help="The probe task the suite scores.")
@click.option(
    "--data", "-d", required=True, help="The data: a folder, a list, sklearn:digits, shapes."
)
@click.option(
    "--split", required=True, help="The evaluation split (one condition unless --condition)."
)
@click.option(
    "--condition",
    "conditions",
    multiple=True,
    metavar="NAME=SPLIT_OR_LIST",
    help="A condition and the split of --data (or a .csv/.jsonl list) holding its samples.",
)
@click.option(
    "--param", "-p", "params", multiple=True, metavar="KEY=VALUE", help="A pinned task parameter."
)
@click.option(
    "--pin",
    "pins",
    multiple=True,
    metavar="SETTING=VALUE",
    help="Pin a setting (layers=-1, pooling=cls, precision=fp32, input_size=224...); a setting "
    "left open may vary and the board's label shows it.",
)
@click.option(
    "--weights",
    type=click.Choice(["pretrained", "random"]),
    default="pretrained",
    show_default=True,
    help="What the suite ranks: pretrained checkpoints, or untrained (random or fixed-weight) "
    "baselines only.",
)
@output_option
@data_layout_options
@json_option
@with_store
def suite_new(store, conditions: tuple[str, ...], params: tuple[str, ...], pins: tuple[str, ...],
              output: str | None, as_json: bool, **suite) -> None:
    """Write a suite file from vbstore's own manifests: digests and counts computed for you.

    The protocol is Visin's; what only vbstore reads (task params, weights rule, pinned
    settings, each condition's split, the content digest) is in the `vbstore` block.
    """
    # suite: slug, version, name, task, data, split, weights and data_options, as new_suite
    # takes them
    doc = suites.new_suite(
        store,
        conditions=suites.parse_assignments(conditions, "NAME=SPLIT_OR_LIST") or None,
        params=parse_params(params),
        pin={k: _json_value(v) for k, v in
             suites.parse_assignments(pins, "SETTING=VALUE").items()},
        **suite,
    )
    doc.pop("kind")
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    if output:
        Path(output).write_text(text)
        emit(as_json, {"written": output, "suite": doc}, f"wrote {output}")
    else:
        click.echo(text, nl=False)


# ---- evaluations ---------------------------------------------------------------------------


def result_on_suite(store, suite_ref: str, backbone: str, data: str | None, request: dict,
                    run: dict, dry_run: bool, as_json: bool, given: dict) -> None:
    """``get result --suite``: the suite's task, parameters and settings, every condition
    planned, then computed, then the verdict and the checkpoint's place on the board."""
    done = suites.run_suite(store, suite_ref, backbone, data=data, dry_run=dry_run, **given,
                            **request, **run)

    def text() -> None:
        if done.evaluation is None:
            for condition, the_plan in done.plans.items():
                click.echo(f"{condition}: plan for {the_plan.task.name} on "
                           f"{the_plan.request.backbone.spec} (nothing computed):")
                for line in the_plan.describe():
                    click.echo(f"  {line}")
            click.echo(f"checked against {done.suite.ref}; nothing was computed or recorded")
            return
        for condition, result in done.results.items():
            how = "cached" if result.from_cache else "computed"
            click.echo(f"{condition}: result {result.id[:12]} ({how} in {result.seconds:.2f} s)")
        _print_evaluation(done.evaluation)
        if done.place is not None:
            click.echo(_place_line(done.place))

    emit(as_json, done.as_dict(), text)


def _place_line(place: dict) -> str:
    """``board     rank 2 of 5 on tex-knn@1 (3 attempts)``, or why it does not rank."""
    attempts = place["attempts"]
    tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
    if place["rank"] is None:
        return (f"  board     not ranked on {place['suite']} ({tries}); "
                f"{place['ranked']} ranked row{'s' if place['ranked'] != 1 else ''}")
    return f"  board     rank {place['rank']} of {place['ranked']} on {place['suite']} ({tries})"


@click.command("evaluations")
@click.option("--suite", "suite_ref", default=None, help="Only this suite (slug@version).")
@click.option(
    "--state",
    type=click.Choice(["eligible", "incomplete", "incompatible"]),
    default=None,
    help="Only evaluations with this verdict.",
)
@click.option("--project", default=None, help="Only evaluations recorded in this project.")
@json_option
@with_store
def evaluations(store, suite_ref, state, project, as_json) -> None:
    """List recorded evaluations, newest first, with their verdicts."""
    rows = suites.list_evaluations(store, suite_ref, state, project)

    def text() -> None:
        for r in rows:
            reasons = f": {', '.join(r['reasons'])}" if r["reasons"] else ""
            click.echo(
                f"{r['id'][:12]}  {r['suite']:<20} {r['label']:<28} {r['evidence']:<9} "
                f"{r['state']}{reasons}"
            )

    emit(as_json, rows, text)


@click.command("promote")
@click.argument("evaluation")
@click.option("--suite", "suite_ref", default=None, help="Copy onto this suite (default: its own).")
@click.option("--label", default=None, help="The checkpoint label you vouch for.")
@click.option(
    "--sample-count",
    "counts",
    multiple=True,
    metavar="NAME=N",
    help="A sample count you vouch for.",
)
@json_option
@with_store
def promote(store, evaluation, suite_ref, label, counts, as_json) -> None:
    """Vouch for an evaluation as a maintainer: a copy is recorded as attested evidence."""
    result = suites.promote(
        store, evaluation, suite=suite_ref, label=label, sample_counts=_counts(counts)
    )
    emit(as_json, result.as_dict(), lambda: _print_evaluation(result))


@click.command("leaderboard")
@click.argument("ref")
@click.option(
    "--observed", is_flag=True, help="Rank only evaluations vbstore computed (complete evidence)."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(suites.FORMATS),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also draw a bar chart with per-condition markers (needs matplotlib).",
)
@click.option("--project", default=None,
              help="Rank only the evaluations recorded in this project (Visin's pool).")
@click.option("--page", type=int, default=None,
              help="This page of the ranked checkpoints (ranks stay global; default: all).")
@click.option("--limit", type=int, default=None,
              help=f"Checkpoints per page (1 to {suites.MAX_LIMIT}, default {suites.MAX_LIMIT} "
                   "when paging).")
@click.option("--unranked-page", type=int, default=None,
              help="This page of the checkpoints that could not be ranked.")
@click.option("--all", "all_pages", is_flag=True,
              help="Every page of both lists (the default; Visin's --all).")
@json_option
@with_store
def leaderboard(store, ref, observed, fmt, plot, project, page, limit, unranked_page, all_pages,
                as_json) -> None:
    """Rank a suite's checkpoints: each by its latest ranked attempt, never its best.

    --page/--limit/--unranked-page show one page, as Visin pages a board; the whole board by
    default."""
    if all_pages and (page or limit or unranked_page):
        raise UsageError("--all reads every page: it takes no --page, --limit or --unranked-page",
                         hint="drop --all, or the page flags")
    board = suites.board_page(suites.leaderboard(store, ref, observed=observed, project=project),
                              page=page, limit=limit, unranked_page=unranked_page)
    if plot:
        suites.board_plot(board, plot)
    if as_json or fmt == "json":
        emit(True, board.as_dict())
    else:
        render = {"text": suites.board_text, "md": suites.board_markdown, "csv": suites.board_csv}[
            fmt
        ]
        click.echo(render(board), nl=fmt == "text")


@click.command("diff")
@click.argument("baseline")
@click.argument("candidate")
@click.option(
    "--max-drop",
    type=float,
    default=0.0,
    show_default=True,
    help="How far a score may fall (in the metric's units) before the diff fails.",
)
@click.option(
    "--all-metrics",
    is_flag=True,
    help="Compare every metric the suite names, not only the headline.",
)
@json_option
@with_store
def diff(store, baseline, candidate, max_drop, all_metrics, as_json) -> None:
    """Compare two evaluations on one suite: exit 5 when a score is missing (whatever dropped),
    else 4 when one dropped."""
    result = suites.diff(store, baseline, candidate, max_drop=max_drop, all_metrics=all_metrics)

    def text() -> None:
        for c in result.changes:
            if c.status == "missing":
                click.echo(
                    f"  {c.scope:<16} {c.metric:<16} missing "
                    f"(baseline {c.baseline}, candidate {c.candidate})"
                )
            else:
                click.echo(
                    f"  {c.scope:<16} {c.metric:<16} {c.baseline:.4f} -> {c.candidate:.4f}  "
                    f"{c.improvement:+.4f}  {c.status}"
                )
        for problem in result.problems:
            click.echo(f"  {problem}")
        click.echo(
            "passed"
            if result.passed
            else f"failed: {len(result.regressions)} dropped by more than {max_drop}, "
            f"{len(result.missing)} missing"
        )

    emit(as_json, result.as_dict(), text)
    if result.exit_code:
        sys.exit(result.exit_code)


# ---- import and export ---------------------------------------------------------------------


@import_group.command("results")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--suite", "suite_ref", required=True, help="The suite to record them on, slug@version."
)
@click.option(
    "--condition",
    default=None,
    help="Put every record under this condition (default: its split/dataset).",
)
@click.option(
    "--sample-count",
    "counts",
    multiple=True,
    metavar="NAME=N",
    help="A condition's sample count, when the file does not say.",
)
@click.option(
    "--weights",
    type=click.Choice(["pretrained", "fixed", "checkpoint", "random", "unknown"]),
    default=None,
    help="The weights kind, when the file does not say (VisBench: unknown by default).",
)
@click.option("--checkpoint", type=click.Path(dir_okay=False), default=None,
              help="A Visin results file: the weights file that was loaded (its SHA-256).")
@click.option("--label", default=None, help="A name for --checkpoint (default: the file name).")
@click.option("--dry-run", is_flag=True, help="Store nothing; print the verdicts.")
@run_metadata_options
@json_option
@with_store
def import_results(store, file, suite_ref, condition, counts, weights, checkpoint, label, dry_run,
                   run_metadata, as_json) -> None:
    """Read a VisBench .jsonl, CLIP_benchmark result JSON or Visin results JSON (condition ->
    class -> metric, with --checkpoint) as reported evaluations on a suite.

    A CLIP_benchmark row is the open_clip MODEL@PRETRAINED pretrained checkpoint, or, when
    vbstore exported it, exactly the weights its `vbstore` field names (spec, kind, seed,
    tensor hash). A row that does not say which weights made it (vbstore's random/checkpoint
    marks without that field, a checkpoint path not vouched for with --weights) is refused
    with exit 2, and nothing is stored.
    """
    out = suites.import_results(
        store,
        file,
        suite_ref,
        condition=condition,
        sample_counts=_counts(counts),
        weights=weights,
        dry_run=dry_run,
        checkpoint=suites.file_checkpoint(checkpoint, label) if checkpoint else None,
        **run_metadata,
    )

    def text() -> None:
        for evaluation in out:
            _print_evaluation(evaluation)

    emit(as_json, [e.as_dict() for e in out], text)


@export_group.command("evaluation")
@click.argument("evaluation")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["visin"]),
    default="visin",
    show_default=True,
    help="visin: the condition -> class -> metric file `visin evaluate` accepts.",
)
@output_option
@json_option
@with_store
def export_evaluation(store, evaluation, fmt, output, as_json) -> None:
    """Export an evaluation's results for another tool."""
    text = json.dumps(
        suites.visin_results(suites.open_evaluation(store, evaluation)), indent=2, sort_keys=True
    )
    if output:
        Path(output).write_text(text + "\n")
        emit(as_json, {"written": output}, f"wrote {output}")
    else:
        click.echo(text)


COMMANDS = [suite_group, evaluations, promote, leaderboard, diff]  # evaluate: evaluate_cmd.py
