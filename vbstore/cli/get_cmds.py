"""``vbstore get result|features|manifest``: ask for an artifact, compute only what is missing."""

from __future__ import annotations

from collections.abc import Callable

import click

from .._fields import FIELDS, POOLINGS
from . import _answers
from ._common import emit, json_option, with_store
from ._dataopts import data_layout_options, parse_params
from ._executoropts import executor_options, progress_for
from ._fields import field_option, field_options
from ._resulttext import result_lines
from ._visflags import (
    FLAGS,
    append_results,
    check_save_clf,
    flag_params,
    merge,
    probe_flag_options,
    results_option,
    save_classifier_to,
    save_clf_option,
)
from .data_cmds import manifest_cmd

# Local imports: the library loads when a command runs, not with this module: listing the
# commands (--help) imports every command module, and a cached get loads only what it reads.


@click.group()
def get() -> None:
    """Get an artifact, computing only what the store lacks."""


def _remember_model_type(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    ctx.meta["model_type"] = value


def _typed_backbone(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from ..backbones import with_model_type

    return with_model_type(value, ctx.meta.get("model_type"))


def backbone_options(func):
    """The flags that choose a backbone and its weights."""
    for option in reversed([
        field_option("backbone", callback=_typed_backbone),
        # eager, and consumed by --backbone's callback: no command signature changes
        click.option("--model-type", default=None, is_eager=True, expose_value=False,
                     callback=_remember_model_type,
                     help="CLIP_benchmark's --model_type: read -b MODEL@TAG (or MODEL,TAG) as "
                          "a model of this registered type (open_clip, or a "
                          "register_clip_loader plugin's)."),
        *(field_option(name) for name in ("weights", "backbone_seed", "input_size", "layers",
                                          "precision", "device")),
    ]):
        func = option(func)
    return func


def parse_layers(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of integers",
                                 param_hint="--layers") from None


def val_split_option(func: Callable) -> Callable:
    """``--val-split`` (its row of the table), with CLIP_benchmark's ``--val_split`` as an
    alias."""
    row = FIELDS["val_split"]
    assert row.flag is not None
    return click.option(row.flag, "--val_split", row.name, default=None, help=row.help)(func)


@get.command("result")
@backbone_options
@field_options(
    # the command's own help for the same row: get result resolves -t auto
    FIELDS["task"].but(help="Probe task (vbstore list tasks); with --suite, the suite's; auto: "
                            "the task CLIP_benchmark's --task auto runs on --data (retrieval on "
                            "caption sets, else zero-shot classification), as sweep --tasks "
                            "auto."),
    "data", "split", "train_data", "train_split", "limit", "train_limit", "seed", "seeds",
    "params", "finetune_blocks", "backbone_lr", "language", "head", "strict", "recompute")
@val_split_option
@click.option("--dry-run", is_flag=True,
              help="Print each step (stored, on a remote, or to compute with its cost) and "
                   "compute nothing.")
@click.option("--suite", "suite_ref", default=None,
              help="Score every condition of this suite (slug@version) with its task, "
                   "parameters and pinned settings (a flag that contradicts one is refused), "
                   "record the evaluation and print its verdict and place on the board.")
@field_options("notes")
@click.option("--plugin", "plugins", multiple=True, metavar="FILE.py",
              help="Import this Python file first: its own tasks and target kinds "
                   "(docs/tasks.md#your-own-probe). Repeatable.")
@results_option
@save_clf_option
@probe_flag_options
@data_layout_options
@executor_options
@json_option
@with_store
def get_result_cmd(store, dry_run: bool, suite_ref: str | None, plugins: tuple[str, ...],
                   results_file: str | None, save_clf: str | None, as_json: bool,
                   **options) -> None:
    """Metrics of a probe TASK for a backbone on data, from the store when known.

    Walks result -> head -> features -> manifest/backbone and computes only what is missing; a
    cached result returns without importing torch, and the same command line run again is
    answered before click loads, once its files and registry rows are checked unchanged (the
    answer cache). `vbstore why ID` shows where it came from.
    """
    from .._plugins import load_plugin
    from ..data import decode_once
    from ..engine import execute, plan, result_request
    from ..errors import VbstoreError

    for path in plugins:
        load_plugin(path)
    flags = flag_params(options)  # the VisBench flags' task parameters
    options["layers"] = parse_layers(options["layers"])
    run = {name: options.pop(name) for name in ("device", "recompute", "executor",
                                                "batch_size")}
    run["progress"] = progress_for(run["executor"], as_json)
    backbone, task, data = (options.pop(name) for name in ("backbone", "task", "data"))
    auto = task == "auto"
    if auto:  # the task CLIP_benchmark's --task auto runs on this data (sweep's)
        from ..interop import clip_benchmark_task

        if data is None:
            raise click.UsageError("-t auto picks the task from --data, which is not given.")
        task = clip_benchmark_task(str(data))
    if suite_ref is not None:  # the suite's task, parameters and settings, then its verdict
        from .suite_cmds import result_on_suite

        if results_file is not None:
            from ..errors import UsageError

            raise UsageError("--results writes one run's record; --suite runs one per condition",
                             hint="drop --results, then `vbstore export results --format "
                                  "visbench` writes every stored result")
        if save_clf is not None:
            from ..errors import UsageError

            raise UsageError("--save-clf writes one run's classifier; --suite runs one per "
                             "condition", hint="drop --save-clf, and ask for the condition "
                                               "with get result -t and -d")
        pinned = {name: options.pop(name) for name in SUITE_PINS}
        given = _given(task, options.pop("params"), flags, **pinned)
        # the rest is what the suite leaves to the command line
        result_on_suite(store, suite_ref, backbone, data, options, run, dry_run, as_json, given)
        return
    for name, value in (("--task", task), ("--data", data)):
        if value is None:
            raise click.UsageError(f"Missing option '{name}' (or --suite, which names it).")
    # one request: an image the plan's manifests decode is decoded once, for its extraction
    with decode_once():
        try:
            check_save_clf(task, save_clf, dry_run)
            options["params"] = merge(task, parse_params(options["params"]), flags)
            # the key main made of this command line, when the answer cache could not answer it
            pending = None if dry_run or run["recompute"] else (
                click.get_current_context().find_root().obj or {}).get("answer")
            _answers.watch(store, pending)  # the store notes what this answer reads
            the_plan = plan(result_request(backbone, task, data, **options), store,
                            dry_run=dry_run)
        except VbstoreError as exc:
            if auto:  # the user named no task: say which one was refused, and why it was picked
                exc.hint = "; ".join(filter(None, (
                    exc.hint, f"-t auto picked {task} for {data} (CLIP_benchmark's --task "
                              "auto); name another task with -t")))
            raise
        if dry_run:
            emit(as_json, the_plan.as_dict(), lambda: print_plan(the_plan))
            return
        result = execute(the_plan, **run)
    append_results(store, result.id, results_file)
    save_classifier_to(the_plan, save_clf)
    emit(as_json, result.as_dict(), lambda: print_result(result))
    _answers.record(store, pending, the_plan, result, as_json)


# the settings a suite pins: a flag given for one must agree with the suite (suite_cmds)
SUITE_PINS = ("layers", "pooling", "input_size", "precision", "seeds", "finetune_blocks",
              "backbone_lr", "weights")


def _given(task: str | None, params: tuple[str, ...], flags: dict, **settings) -> dict:
    """What the command line chose of what a suite decides: the task, the task parameters and
    each setting given on it (a flag left at its default is the suite's to set)."""
    ctx = click.get_current_context()
    chosen = {name: value for name, value in settings.items()
              if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT
              and value is not None}
    given = dict(parse_params(params))
    flagged = flag_params(flags)
    # a flag's task parameters join -p's (the suite's task checks them when -t is left out)
    given = merge(task, given, flagged) if task else {**given, **flagged}
    return {"task": task, "params": given, **chosen}


def print_plan(the_plan) -> None:
    click.echo(f"plan for {the_plan.task.name} on {the_plan.request.backbone.spec} "
               "(nothing computed):")
    for line in the_plan.describe():
        click.echo(f"  {line}")


def print_result(result) -> None:
    from ..tasks import metric_order

    record = result.record
    lines = result_lines(record, result.id, result.origin, result.seconds,
                         metric_order(record.task, record.params),
                         # per feature set below instead of one line for all
                         from_cache=result.from_cache or bool(result.features),
                         reproduced=result.reproduced)
    lines[1:1] = [(False, line) for line in features_lines(result.features)]
    for err, line in lines:
        click.echo(line, err=err)


def features_lines(features) -> list[str]:
    """What a computing call did per feature set: extracted now, reused, or found stored."""
    out = []
    for role, f in features.items():
        if f["stored"]:
            what = "stored (no forward pass)"
        else:
            what = f"extracted {f['extracted']} images, reused {f['reused']}"
        out.append(f"  {role} features: {what}  [{f['id'][:12]}]")
    return out


@get.command("features")
@backbone_options
@field_options(
    FIELDS["data"].but(required=True,
                       help="A folder, a .csv/.jsonl list, sklearn:digits, shapes."),
    FIELDS["split"].but(help="Split to read (train, val...)."),
    FIELDS["limit"].but(help="Per-class (or total) cap on samples."),
    FIELDS["pooling"].but(kind=(*POOLINGS, "none"),
                          help="Pooled vector to keep (default: the backbone's own)."),
    "mode",
    FIELDS["batch_size"].but(help="Images per forward pass."),
)
@data_layout_options
@executor_options
@json_option
@with_store
def get_features_cmd(store, as_json: bool, backbone: str, data: str, backbone_seed: int | None,
                     layers: str | None, **options) -> None:
    """Features of DATA under a backbone, extracted once and shared by every task."""
    from ..engine import get_features

    # get_features' seed is the backbone's (it has no probe)
    result = get_features(backbone, data, store=store, seed=backbone_seed,
                          layers=parse_layers(layers) or (-1,),
                          progress=progress_for(options["executor"], as_json), **options)
    info = result.as_dict()

    def text() -> None:
        stats = info["stats"]
        how = {"store": "cached in the store",
               "remote": f"fetched from remote {stats.get('remote')}"}.get(info["source"]) or (
            f"extracted {stats.get('extracted', 0)} images, reused {stats.get('reused', 0)}")
        click.echo(f"{info['featureset']}  {info['samples']} samples ({how})")
        click.echo(f"  backbone {info['backbone'][:12]}  manifest {info['manifest'][:12]}  "
                   f"extractor {info['extractor']}")

    emit(as_json, info, text)


@get.command("head")
@backbone_options
@field_options(
    FIELDS["task"].but(required=True, help="A task that trains a head (vbstore list tasks)."),
    FIELDS["train_data"].but(required=True,
                             help="Training data: a folder, a .csv/.jsonl list, sklearn:digits, "
                                  "shapes, hf:NAME, torchvision:NAME, wds:PATH."),
    "train_split",
    FIELDS["train_limit"].but(help="Per-class cap on training samples."),
    "seed",
    FIELDS["params"].but(help="A task parameter."),
    "finetune_blocks", "backbone_lr",
)
@click.option("--tag", "tag_name", default=None, help="Also name the head (a ref, and a gc root).")
@field_options(
    FIELDS["pooling"].but(help="Pooled vector a pooled task trains on (default: the backbone's "
                               "own; the same head as leaving it out when equal)."),
    "batch_size",
)
@click.option("--train-batch-size", type=FLAGS["train-batch-size"][1], default=None,
              help=FLAGS["train-batch-size"][2])
@data_layout_options
@executor_options
@json_option
@with_store
def get_head_cmd(store, as_json: bool, backbone: str, task: str, train_data: str,
                 tag_name: str | None, train_batch_size: int | None, **options):
    """Train a probe head on a backbone's features, or fetch it from the store or a remote."""
    from ..engine import get_head

    # a task parameter, as on get result: in the head's key, refused where -p disagrees
    options["params"] = merge(task, parse_params(options["params"]), {} if train_batch_size is None
                              else {"batch_size": train_batch_size})
    options["layers"] = parse_layers(options["layers"])
    result = get_head(backbone, task, train_data, store=store,
                      progress=progress_for(options["executor"], as_json), **options)
    if tag_name:
        store.tag(tag_name, result.id)

    def text() -> None:
        record = result.record
        state = result.where
        click.echo(f"{result.id}  {record.task} head ({state} in {result.seconds:.2f} s)")
        click.echo(f"  backbone {record.backbone[:12]}  pooling {record.pooling}  layers "
                   f"{record.layers}  embed_dim {record.embed_dim}")
        for name, value in (record.train_metrics or {}).items():
            click.echo(f"  {name:<12} {value:.4f}  (train)")
        if tag_name:
            click.echo(f"  tagged {tag_name}")

    emit(as_json, result.as_dict(), text)


get.add_command(manifest_cmd)
