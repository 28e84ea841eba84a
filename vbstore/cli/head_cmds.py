"""Probe heads on the command line: ``push head``, ``pull head``, ``push results``, ``export
head`` and ``import head`` (``get head`` lives with the other ``get`` commands)."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import UsageError
from ._common import emit, human_size, json_option, with_store
from .remote_cmds import pull, push
from .results_cmds import export_group

# Local imports: the library loads when a command runs, not with this module: listing the
# commands (--help) imports every command module, and a cached get loads only what it reads.


@push.command("head")
@click.argument("name")
@click.option("--to", "to", required=True, metavar="REMOTE", help="The remote to push to.")
@click.option("--private/--public", default=None,
              help="Hub repository visibility when the push creates it (default: the remote's "
              "private option, else private).")
@click.option("--metrics-from", default=None, metavar="RESULT",
              help="Put this result's evaluation metrics on the Hub model card (a result "
              "computed with this head).")
@click.option("--with-lineage", is_flag=True,
              help="Also push what the head was trained from (features, packs, manifests).")
@json_option
@with_store
def push_head_cmd(store, name: str, to: str, private: bool | None, metrics_from: str | None,
                  with_lineage: bool, as_json: bool) -> None:
    """Push head NAME with its backbone and weights records; on the Hub, a model repo too."""
    from .._progress import reporting
    from ..heads import push_head

    with reporting(True):  # files pushed so far, on stderr (kept under --json)
        pushed = push_head(store, name, to, private=private, metrics_from=metrics_from,
                           with_lineage=with_lineage)
    for oid in pushed.not_here:
        # collected here, or never pulled with it: the push went on, but not silently
        click.echo(f"warning: the head's backbone record {oid[:12]} is not in this store, so it "
                   "is not pushed with it (a receiver checks the head against its own "
                   "backbone)", err=True)
    result = pushed.push
    emit(as_json, result.as_dict(),
         f"pushed head {pushed.head[:12]} -> {to}/{name}: {len(result.uploaded)} uploaded"
         + (f", revision {result.revision}" if result.revision else ""))


def head_check_options(func):
    """The flags that check a head against a backbone before it gets a local name."""
    for option in reversed([
        click.option("--force", is_flag=True,
                     help="Move an existing local ref that points elsewhere."),
        click.option("--backbone", default=None,
                     help="Refuse the head unless it was trained on these weights."),
        click.option("--weights", default="default", show_default=True,
                     help="Weights of --backbone."),
        click.option("--backbone-seed", type=int, default=None,
                     help="Init seed for --weights random; an error with other weights."),
        click.option("--input-size", type=int, default=None,
                     help="Input resolution of --backbone."),
        click.option("--no-strict", is_flag=True,
                     help="Warn instead of refusing a mismatched head."),
    ]):
        func = option(func)
    return func


def _check_described(backbone: str | None, weights: str, backbone_seed: int | None,
                     input_size: int | None) -> None:
    """Refuse flags that describe ``--backbone`` when none is given (they would check nothing)."""
    given = [flag for flag, value in (("--weights", weights != "default"),
                                      ("--backbone-seed", backbone_seed is not None),
                                      ("--input-size", input_size is not None)) if value]
    if backbone is None and given:
        raise UsageError(f"{', '.join(given)} describe --backbone, which is not given, so "
                         "nothing would be checked",
                         hint="add --backbone SPEC to refuse a head trained on other weights, "
                              f"or drop {', '.join(given)}")


@pull.command("head")
@click.argument("target", metavar="REMOTE/NAME")
@click.option("--revision", default=None, metavar="SHA",
              help="Pin a Hub commit (branch, tag or sha).")
@click.option("--as", "as_name", default=None, metavar="NAME",
              help="Local ref name (default: NAME).")
@head_check_options
@json_option
@with_store
def pull_head_cmd(store, target, revision, as_name, force, backbone, weights, backbone_seed,
                  input_size,
                  no_strict, as_json) -> None:
    """Pull a head, verified blob by blob; with --backbone, refuse one trained for other weights."""
    from .._progress import reporting
    from ..backbones import check_seed
    from ..engine import resolve_backbone
    from ..heads import head_summary, pull_head

    check_seed(weights, backbone_seed)  # before anything is fetched
    _check_described(backbone, weights, backbone_seed, input_size)

    def resolved() -> tuple[dict, str]:  # once the head is here: a spec may build records
        ref = resolve_backbone(store, backbone, weights=weights, seed=backbone_seed,
                               input_size=input_size)
        return ref.doc, ref.id

    with reporting(True):  # blobs pulled so far, on stderr (kept under --json)
        pulled = pull_head(store, target, revision=revision, as_name=as_name, force=force,
                           backbone=resolved if backbone is not None else None,
                           strict=not no_strict)
    result = pulled.pull

    def text() -> None:
        click.echo(f"pulled head {(result.id or '')[:12]} -> {result.local_ref} "
                   f"({head_summary(pulled.record)})"
                   + (f", revision {result.revision}" if result.revision else ""))
        for problem in pulled.mismatch:
            click.echo(f"warning: {problem}; results with it are comparable with nothing", err=True)

    emit(as_json, pulled.as_dict(), text)


def _expected(store, backbone: str, weights: str, backbone_seed: int | None,
              input_size: int | None) -> dict:
    """What a head for ``backbone`` must have been trained on: its weights and input size."""
    from ..engine import resolve_backbone
    from ..heads import backbone_expectation

    ref = resolve_backbone(store, backbone, weights=weights, seed=backbone_seed,
                           input_size=input_size)
    return backbone_expectation(store, ref.doc, ref.id)


@export_group.command("head")
@click.argument("name")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False),
              help="The .safetensors file to write.")
@json_option
@with_store
def export_head_cmd(store, name: str, output: str, as_json: bool) -> None:
    """Write head NAME (a ref or id) to a safetensors file, byte for byte (same id anywhere)."""
    from ..heads import export_head, head_compat

    oid = export_head(store, name, output)
    record = head_compat(store, oid)
    emit(as_json, {"id": oid, "path": output, "compat": record.to_dict()},
         f"exported head {oid[:12]} ({record.task}) -> {output}")


@click.group(name="import")
def import_group() -> None:
    """Bring artifacts into the store: heads from `vbstore export head`, other tools' results."""


@import_group.command("head")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--as", "as_name", default=None, metavar="NAME",
              help="Local ref name (default: the file name without .safetensors).")
@head_check_options
@json_option
@with_store
def import_head_cmd(store, file, as_name, force, backbone, weights, backbone_seed, input_size,
                    no_strict, as_json) -> None:
    """Import a head file (safetensors only, never a pickle), checked before the store changes."""
    from ..backbones import check_seed
    from ..heads import head_summary, import_head

    check_seed(weights, backbone_seed)
    _check_described(backbone, weights, backbone_seed, input_size)
    expected = (_expected(store, backbone, weights, backbone_seed, input_size)
                if backbone is not None else None)
    name = as_name or Path(file).name.removesuffix(".safetensors")
    result = import_head(store, file, name=name, force=force, expected=expected,
                         strict=not no_strict)

    def text() -> None:
        click.echo(f"imported head {result.id[:12]} -> {result.name} "
                   f"({head_summary(result.record)})")
        for problem in result.mismatch:
            click.echo(f"warning: {problem}; results with it are comparable with nothing", err=True)

    emit(as_json, result.as_dict(), text)


@push.command("results")
@click.option("--to", "to", required=True, metavar="REMOTE", help="The remote to push to.")
@click.option("--task", default=None, help="Only results of this task.")
@click.option("--backbone", default=None, help="Only backbones whose spec contains this.")
@click.option("--with", "with_", default="", metavar="KINDS",
              help="Also send these, comma-separated: features (featuresets and their packs, "
                   "fine-tuning's prefixes, text-tower outputs, captions), heads (with their "
                   "fine-tuned weights), images (the files behind manifests). By default only "
                   "the results and their lineage documents (weights, backbone, manifest "
                   "records) go.")
@json_option
@with_store
def push_results_cmd(store, to: str, task: str | None, backbone: str | None, with_: str,
                     as_json: bool) -> None:
    """Push stored results (refs results/<id>) so teammates get them as cache hits."""
    from .._progress import reporting
    from ..engine import result_rows
    from ..remotes import push_results, result_kinds

    extras = [w.strip() for w in with_.split(",") if w.strip()]
    result_kinds(extras)  # an unknown name is refused before anything is read or sent
    ids = [store.resolve(row["id"]) for row in result_rows(store, task, backbone)]
    with reporting(True):  # results pushed so far, on stderr (kept under --json)
        summary = push_results(store, to, ids, extras)

    def text() -> None:
        click.echo(f"pushed {len(summary.results)} results to {to}: {summary.objects} objects "
                   f"sent ({human_size(summary.bytes)}), {summary.already_there} already there")
        for kind, row in sorted(summary.sent.items()):
            click.echo(f"  {kind:<10} {row['objects']:>6} objects  {human_size(row['bytes'])}")
        if summary.left_out:
            left = ", ".join(f"{row['objects']} {kind} ({human_size(row['bytes'])})"
                             for kind, row in sorted(summary.left_out.items()))
            click.echo(f"not sent: {left}; add them with --with features,heads,images")

    emit(as_json, summary.as_dict(), text)
