"""``vbstore get result|features|manifest``: ask for an artifact, compute only what is missing."""

from __future__ import annotations

import click

from . import _answers
from ._common import emit, json_option, with_store
from ._dataopts import data_layout_options, parse_params
from ._executoropts import executor_options, progress_for
from ._resulttext import result_lines
from ._visflags import (
    FLAGS,
    POOLINGS,
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
        click.option("--backbone", "-b", required=True, callback=_typed_backbone,
                     help="Backbone spec: torchvision:resnet18, timm:NAME, dinov2:dinov2_vits14, "
                          "open_clip:MODEL@TAG, or a registered name (vbstore list backbones)."),
        # eager, and consumed by --backbone's callback: no command signature changes
        click.option("--model-type", default=None, is_eager=True, expose_value=False,
                     callback=_remember_model_type,
                     help="CLIP_benchmark's --model_type: read -b MODEL@TAG (or MODEL,TAG) as "
                          "a model of this registered type (open_clip, or a "
                          "register_clip_loader plugin's)."),
        click.option("--weights", default="default", show_default=True,
                     help="default (pinned pretrained), a pretrained tag, a checkpoint path, "
                          "or random."),
        click.option("--backbone-seed", type=int, default=None,
                     help="Init seed for --weights random (default 0); an error with other "
                          "weights."),
        click.option("--input-size", type=int, default=None, help="Override the input resolution."),
        click.option("--layers", default=None,
                     help="Comma-separated block indices (negative from the end); default -1."),
        click.option("--precision", type=click.Choice(["fp32", "bf16"]), default="fp32",
                     show_default=True,
                     help="Compute precision; bf16 is faster on recent CPUs/GPUs but changes the "
                          "numbers."),
        click.option("--device", default=None,
                     help="cpu, cuda, cuda:1... (default: cuda if available)."),
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


@get.command("result")
@backbone_options
@click.option("--task", "-t", default=None,
              help="Probe task (vbstore list tasks); with --suite, the suite's; auto: the task "
                   "CLIP_benchmark's --task auto runs on --data (retrieval on caption sets, "
                   "else zero-shot classification), as sweep --tasks auto.")
@click.option("--data", "-d", default=None,
              help="Evaluation data: a folder, a .csv/.jsonl list, sklearn:digits, shapes; "
                   "with --suite, the suite's unless its data is elsewhere.")
@click.option("--split", default=None, help="Split of --data to evaluate on (val, test...).")
@click.option("--train-data", default=None, help="Training data for tasks that fit a head.")
@click.option("--train-split", default=None, help="Split of --train-data to train on.")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="Per-class (or total) cap on eval samples.")
@click.option("--train-limit", type=click.IntRange(min=1), default=None,
              help="The same cap for training data.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the probe's training.")
@click.option("--seeds", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run N seeds on one set of features; report mean, std, min, max and a 95% "
                   "t-interval over the seeds (the probe's randomness; the eval sample's is "
                   "the bootstrap CI every result carries).")
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE",
              help="A task parameter, e.g. -p k=10 -p temperature=0.05 (see vbstore list tasks).")
@click.option("--finetune-blocks", type=click.IntRange(min=0), default=0, show_default=True,
              help="Train the backbone's last N blocks with the head (classification, "
                   "multilabel, the trained dense and box probes); the frozen blocks' output is "
                   "stored once, and the result is never ranked with a frozen one "
                   "(docs/finetune.md).")
@click.option("--backbone-lr", type=float, default=None,
              help="Peak learning rate of the fine-tuned blocks [default: the task's lr / 100].")
@click.option("--language", default=None,
              help="CLIP_benchmark's --language: of cb: data (its class names, templates, "
                   "captions) and of a zero-shot task's prompts (-p language).")
@click.option("--head", default=None,
              help="Apply this stored head (id or ref) instead of training one.")
@click.option("--no-strict", is_flag=True,
              help="Apply a mismatched head anyway (warns; the result is comparable with nothing).")
@click.option("--recompute", is_flag=True,
              help="Compute the result afresh (heads retrained, features reused); exit 12 if it "
                   "did not reproduce.")
@click.option("--dry-run", is_flag=True,
              help="Print each step (stored, on a remote, or to compute with its cost) and "
                   "compute nothing.")
@click.option("--suite", "suite_ref", default=None,
              help="Score every condition of this suite (slug@version) with its task, "
                   "parameters and pinned settings (a flag that contradicts one is refused), "
                   "record the evaluation and print its verdict and place on the board.")
@click.option("--notes", default=None, metavar="TEXT",
              help="Free text to attach to the result (VisBench's --notes): kept in the "
                   "registry, shown by show, why and export results; no part of the result's "
                   "id, so a stored result takes it without computing again.")
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
def get_result_cmd(store, backbone, weights, backbone_seed, input_size, layers, precision, device,
                   task, data, split, train_data, train_split, limit, train_limit, seed, seeds,
                   params, finetune_blocks, backbone_lr, language, head, no_strict, recompute,
                   dry_run, suite_ref, notes, plugins, results_file, save_clf, data_options,
                   executor, as_json, batch_size, pooling, **flags) -> None:
    """Metrics of a probe TASK for a backbone on data, from the store when known.

    Walks result -> head -> features -> manifest/backbone and computes only what is missing; a
    cached result returns without importing torch, and the same command line run again is
    answered before click loads, once its files and registry rows are checked unchanged (the
    answer cache). `vbstore why ID` shows where it came from.
    """
    from .._plugins import load_plugin
    from ..engine import execute, plan, result_request

    for path in plugins:
        load_plugin(path)
    if task == "auto":  # the task CLIP_benchmark's --task auto runs on this data (sweep's)
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
        run = {"device": device, "progress": progress_for(executor, as_json),
               "recompute": recompute, "executor": executor, "batch_size": batch_size}
        request = {"train_data": train_data, "split": split, "train_split": train_split,
                   "limit": limit, "train_limit": train_limit, "seed": seed, "head": head,
                   "strict": not no_strict, "backbone_seed": backbone_seed,
                   "data_options": data_options, "language": language, "notes": notes}
        result_on_suite(store, suite_ref, backbone, data, request, run, dry_run, as_json,
                        _given(task, params, flags, layers=parse_layers(layers),
                               pooling=pooling, input_size=input_size, precision=precision,
                               seeds=seeds, finetune_blocks=finetune_blocks,
                               backbone_lr=backbone_lr, weights=weights))
        return
    for name, value in (("--task", task), ("--data", data)):
        if value is None:
            raise click.UsageError(f"Missing option '{name}' (or --suite, which names it).")
    check_save_clf(task, save_clf, dry_run)
    task_params = merge(task, parse_params(params), flag_params(flags))

    def request_for(data, split):
        return result_request(
            backbone, task, data, train_data, params=task_params, split=split,
            train_split=train_split, limit=limit, train_limit=train_limit, seed=seed, seeds=seeds,
            head=head, strict=not no_strict, weights=weights, backbone_seed=backbone_seed,
            input_size=input_size, layers=parse_layers(layers), precision=precision,
            data_options=data_options, pooling=pooling, finetune_blocks=finetune_blocks,
            backbone_lr=backbone_lr, language=language, notes=notes)

    # the key main made of this command line, when the answer cache could not answer it
    pending = None if dry_run or recompute else (click.get_current_context().find_root().obj
                                                 or {}).get("answer")
    _answers.watch(store, pending)  # the store notes what this answer reads
    the_plan = plan(request_for(data, split), store, dry_run=dry_run)
    if dry_run:
        emit(as_json, the_plan.as_dict(), lambda: print_plan(the_plan))
        return
    result = execute(the_plan, device=device, progress=progress_for(executor, as_json),
                     recompute=recompute, executor=executor, batch_size=batch_size)
    append_results(store, result.id, None if dry_run else results_file)
    save_classifier_to(the_plan, save_clf)
    emit(as_json, result.as_dict(), lambda: print_result(result))
    _answers.record(store, pending, the_plan, result, as_json)


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
    lines = result_lines(record.to_dict(), result.id, result.origin, result.seconds,
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
@click.option("--data", "-d", required=True,
              help="A folder, a .csv/.jsonl list, sklearn:digits, shapes.")
@click.option("--split", default=None, help="Split to read (train, val...).")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="Per-class (or total) cap on samples.")
@click.option("--pooling", type=click.Choice(["cls", "mean", "gap", "none"]), default=None,
              help="Pooled vector to keep (default: the backbone's own).")
@click.option("--mode", type=click.Choice(["pooled", "dense", "both"]), default="pooled",
              show_default=True,
              help="Keep pooled vectors, dense maps (float16), or both.")
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True,
              help="Images per forward pass.")
@data_layout_options
@executor_options
@json_option
@with_store
def get_features_cmd(store, backbone, weights, backbone_seed, input_size, layers, precision, device,
                     data, split, limit, pooling, mode, batch_size, data_options, executor,
                     as_json) -> None:
    """Features of DATA under a backbone, extracted once and shared by every task."""
    from ..engine import get_features

    result = get_features(
        backbone, data, store=store, split=split, limit=limit, layers=parse_layers(layers) or (-1,),
        pooling=pooling, mode=mode, precision=precision, weights=weights, seed=backbone_seed,
        input_size=input_size, batch_size=batch_size, device=device,
        progress=progress_for(executor, as_json), data_options=data_options, executor=executor,
    )
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
@click.option("--task", "-t", required=True, help="A task that trains a head (vbstore list tasks).")
@click.option("--train-data", required=True,
              help="Training data: a folder, a .csv/.jsonl list, sklearn:digits, shapes, "
              "hf:NAME, torchvision:NAME, wds:PATH.")
@click.option("--train-split", default=None, help="Split of --train-data to train on.")
@click.option("--train-limit", type=click.IntRange(min=1), default=None,
              help="Per-class cap on training samples.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the probe's training.")
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE",
              help="A task parameter.")
@click.option("--finetune-blocks", type=click.IntRange(min=0), default=0, show_default=True,
              help="Train the backbone's last N blocks with the head (classification, "
                   "multilabel, the trained dense and box probes); the frozen blocks' output is "
                   "stored once, and the result is never ranked with a frozen one "
                   "(docs/finetune.md).")
@click.option("--backbone-lr", type=float, default=None,
              help="Peak learning rate of the fine-tuned blocks [default: the task's lr / 100].")
@click.option("--tag", "tag_name", default=None, help="Also name the head (a ref, and a gc root).")
@click.option("--pooling", type=click.Choice(POOLINGS), default=None,
              help="Pooled vector a pooled task trains on (default: the backbone's own; the "
                   "same head as leaving it out when equal).")
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True,
              help="Images per forward pass (extraction; changes no id). The head's batch is "
                   "--train-batch-size.")
@click.option("--train-batch-size", type=FLAGS["train-batch-size"][1], default=None,
              help=FLAGS["train-batch-size"][2])
@data_layout_options
@executor_options
@json_option
@with_store
def get_head_cmd(store, backbone, weights, backbone_seed, input_size, layers, precision, device,
                 task, train_data, train_split, train_limit, seed, params, finetune_blocks,
                 backbone_lr, tag_name, pooling, batch_size, train_batch_size, data_options,
                 executor, as_json):
    """Train a probe head on a backbone's features, or fetch it from the store or a remote."""
    from ..engine import get_head

    # a task parameter, as on get result: in the head's key, refused where -p disagrees
    head_params = merge(task, parse_params(params), {} if train_batch_size is None
                        else {"batch_size": train_batch_size})
    result = get_head(backbone, task, train_data, store=store, train_split=train_split,
                      train_limit=train_limit, seed=seed, weights=weights,
                      backbone_seed=backbone_seed,
                      input_size=input_size, layers=parse_layers(layers), precision=precision,
                      device=device, progress=progress_for(executor, as_json),
                      data_options=data_options, executor=executor, params=head_params,
                      finetune_blocks=finetune_blocks, backbone_lr=backbone_lr, pooling=pooling,
                      batch_size=batch_size)
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
