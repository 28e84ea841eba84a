"""``vbstore run TASK``: one command per task, its settings as real flags.

The flags are generated from the task's declared parameters (``--epochs``, ``--lr``,
``--num-classes``, ``-k``...), so ``vbstore run knn --help`` shows the data layout knn reads and
only knn's settings. It builds the same request as ``vbstore get result --task knn -p k=10``,
so both find the same cached result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from .._fields import FIELDS
from ..errors import UsageError, VbstoreError
from ..tasks import Param, Task, get_task, list_tasks
from ._common import VbstoreGroup, emit, json_option, with_store
from ._dataopts import data_layout_options, parse_params
from ._executoropts import executor_options, progress_for
from ._fields import field_option
from ._visflags import (
    FLAGS,
    append_results,
    check_save_clf,
    results_option,
    save_classifier_to,
    save_clf_option,
)
from .get_cmds import backbone_options, parse_layers, print_plan, print_result

# Local imports: the library loads when a command runs, not with this module: listing the
# commands (--help) imports every command module, and a cached get loads only what it reads.

# the run command's own options: a task parameter with one of these names gets a --task- prefix
_RESERVED = {"backbone", "weights", "backbone_seed", "input_size", "layers", "precision", "device",
             "data", "split", "train_data", "train_split", "limit", "train_limit", "seed", "seeds",
             "param", "no_strict", "recompute", "dry_run", "json", "layout", "stems",
             "train_stems", "image_dir", "target_dir", "target", "target_type", "classes", "splits",
             "min_votes", "partners", "max_angle", "pair_seed", "stride",
             "executor", "ray_address", "ray_sink", "ray_workers", "help", "store", "pooling",
             "finetune_blocks", "backbone_lr", "notes", "results", "save_probe", "no_cache",
             "push_to", "public"}
# VisBench's names: --batch-size is the extraction batch, the head's is --train-batch-size
_RENAMED = {param: flag for flag, (param, _, _) in FLAGS.items() if param == "batch_size"}


# task parameters that are CLIP_benchmark flags: its underscore spelling is an alias
CB_SPELLED_PARAMS = ("fewshot_k", "load_clfs", "recall_k", "val_proportion")


def _flag(name: str) -> str:
    if name in _RENAMED:
        return f"--{_RENAMED[name]}"
    return f"--task-{name}" if name in _RESERVED else f"--{name.replace('_', '-')}"


def _option(name: str, spec: Param) -> click.Option:
    """The click option of one task parameter; None default, so only given values are sent."""
    names = [_flag(name), f"task__{name}"]
    if name in CB_SPELLED_PARAMS:  # CLIP_benchmark's own spelling, as an alias: --fewshot_k
        names.insert(1, f"--{name}")
    if len(name) == 1:
        names = [f"-{name}", f"task__{name}"]
    help_text = f"{spec.help} (default {spec.default!r})"
    if isinstance(spec.default, bool):
        flag = _flag(name)[2:]
        return click.Option([f"--{flag}/--no-{flag}", f"task__{name}"], default=None,
                            help=help_text)
    if isinstance(spec.default, int):
        kind: Any = click.INT
    elif isinstance(spec.default, float):
        kind = click.FLOAT
    elif spec.choices is not None:
        kind = click.Choice(spec.choices)
    else:
        kind = click.STRING
    return click.Option(names, type=kind, default=None, help=help_text)


def _agree(task: Task, name: str, given: dict, flag_value) -> None:
    """Refuse a flag and ``-p`` that set one parameter to different values (neither wins)."""
    if name not in given:
        return

    def value(given_value):  # as the task resolves it: "1 2" and "1,2" are one threshold list
        return task.resolve_params({name: given_value})[name]

    if value(given[name]) != value(flag_value):
        raise UsageError(
            f"{f'-{name}' if len(name) == 1 else _flag(name)} {flag_value} and "
            f"-p {name}={given[name]} disagree",
            hint=f"give {name} once: the flag or -p")


def _command(task: Task) -> click.Command:
    def run(store, *, data_options, executor, as_json, params, **kw) -> None:
        from ..engine import execute, plan, result_request

        if kw.get("public") and kw.get("push_to") is None:  # it would be dropped unseen
            raise UsageError("--public says who may read what --push-to sends; there is no "
                             "--push-to", hint="add --push-to REMOTE, or drop --public")
        if kw.pop("no_cache", False):  # VisBench's cold run: a scratch store, then gone
            _check_no_cache(kw)
            import tempfile
            from pathlib import Path

            from ..store import Store

            with tempfile.TemporaryDirectory(prefix="vbstore-no-cache-") as tmp, \
                    Store(Path(tmp) / "store") as scratch:
                run(scratch, data_options=data_options, executor=executor, as_json=as_json,
                    params=params, **kw)
            return
        given = parse_params(params)
        save_probe = kw.pop("save_probe", None)
        save_clf = kw.pop("save_clf", None)
        check_save_clf(task.name, save_clf, kw["dry_run"])
        push_to, public = kw.pop("push_to", None), kw.pop("public", False)
        if save_probe is not None or push_to is not None:
            _check_save_probe(task, kw, "--push-to" if save_probe is None else "--save-probe")
        if push_to is not None:
            _check_push_to(store, push_to, public)
        # --language is the engine's (cb: data and the prompts), whether or not the task has one
        language = kw.pop("task__language", None)
        for key in [k for k in kw if k.startswith("task__")]:
            value = kw.pop(key)
            if value is not None:
                name = key.removeprefix("task__")
                _agree(task, name, given, value)
                given[name] = value
        dry_run, results_file = kw.pop("dry_run"), kw.pop("results_file")
        how = {"device": kw.pop("device"), "progress": progress_for(executor, as_json),
               "executor": executor, "batch_size": kw.pop("batch_size")}
        kw["layers"] = parse_layers(kw["layers"])
        request = result_request(kw.pop("backbone"), task.name, kw.pop("data"),
                                 kw.pop("train_data", None), params=given, language=language,
                                 data_options=data_options, **kw)
        the_plan = plan(request, store, dry_run=dry_run)
        if dry_run:
            emit(as_json, the_plan.as_dict(), lambda: print_plan(the_plan))
            return
        result = execute(the_plan, **how)
        append_results(store, result.id, results_file)
        save_classifier_to(the_plan, save_clf)
        emit(as_json, result.as_dict(), lambda: print_result(result))
        if save_probe is not None:
            from ..heads import export_head

            head = export_head(store, result.record.inputs["head"], save_probe)
            click.echo(f"saved the trained head {head[:12]} to {save_probe} (its backbone's "
                       "identity inside: `vbstore import head` checks it)", err=True)
        if push_to is not None:
            _push_probe(store, task, result, push_to, public)

    metrics = ", ".join(m.name for m in task.metrics)
    shape = task.shape_spec
    kind = shape.kind.replace("trains a head", "trains a head on --train-data")
    summary = (type(task).__doc__ or task.name).strip().splitlines()[0]
    doc = (f"{summary}\n\nData: {task.data_layout}.\n\n"
           f"Metrics: {metrics} (headline {task.headline}); {kind}.")
    options: list[Callable[[Any], Any]] = [
        field_option(FIELDS["data"].but(required=True, help="Evaluation data.")),
        field_option(FIELDS["split"].but(help="Split of --data to evaluate on.")),
        field_option("limit"),
        field_option(FIELDS["seed"].but(help="Seed of the probe.")),
        field_option(FIELDS["seeds"].but(help="Run N seeds on one set of features.")),
        field_option(FIELDS["params"].but(
            help="A task parameter as KEY=VALUE (for scripts; same as the flags).")),
        click.option("--dry-run", is_flag=True, help="Print the plan and compute nothing."),
        field_option(FIELDS["notes"].but(help="Free text to attach to the result (kept in the "
                                              "registry; no part of its id).")),
        click.option("--no-cache", is_flag=True,
                     help="A cold run (VisBench's --no-cache): computed in a scratch store "
                          "removed afterwards, so nothing is read from or kept in this one; "
                          "--results and --save-probe still write their files."),
        click.option("--save-probe", type=click.Path(dir_okay=False), default=None,
                     metavar="PATH",
                     help="Also write the trained head to PATH (.safetensors, the backbone's "
                          "identity inside; VisBench's --save-probe); refused for a zero-shot "
                          "task."),
        click.option("--push-to", default=None, metavar="REMOTE",
                     help="Also push the trained head, named probes/TASK/RESULT, to this "
                          "configured remote (VisBench's --push-to: an hf:// remote gets a "
                          "model card with the result's metrics); refused, before the run, "
                          "for a zero-shot task or a remote not configured."),
        click.option("--public", is_flag=True,
                     help="With --push-to on the Hub: a public repository (default: the "
                          "remote's own setting); refused without --push-to."),
        field_option(FIELDS["batch_size"].but(
            help="Images per forward pass (extraction; changes no id)."
                 + (" The head's batch is --train-batch-size." if "batch_size" in task.params
                    else ""))),
    ]
    # a dense task's maps have no pooling to choose
    options += shape.pooled_input([field_option(FIELDS["pooling"].but(
        help="Pooled vector to read (default: the backbone's own)."))]) or []
    # the training flags, for a shape that takes training data
    options += shape.train_input([
        field_option(FIELDS["train_data"].but(help="Training data (the head is fit on it).")),
        field_option("train_split"),
        field_option(FIELDS["train_limit"].but(
            help="Per-class (or total) cap on training samples.")),
        # a dense task's own `head` parameter (linear|dpt) keeps --head; the stored head moves
        field_option(FIELDS["head"].but(flag="--apply-head") if "head" in task.params
                     else "head"),
        field_option(FIELDS["strict"].but(help="Apply a mismatched head anyway (warns).")),
    ]) or []
    if task.finetunes:  # a task whose head can train with the blocks (declared in tasks/)
        options += [
            field_option(FIELDS["finetune_blocks"].but(
                help="Train the backbone's last N blocks with the head (docs/finetune.md).")),
            field_option(FIELDS["backbone_lr"].but(
                help="Peak learning rate of the fine-tuned blocks [default: lr / 100].")),
        ]
    if "load_clfs" in task.params:  # a zero-shot classifier to write (CLIP_benchmark's)
        options.append(save_clf_option)
    if "language" not in task.params:  # the language of cb: data (a zero-shot task's: its own)
        options.append(click.option("--language", "task__language", default=None,
                                    help="Language of cb: data (CLIP_benchmark's --language)."))
    func = data_layout_options(with_store(run))
    func = json_option(executor_options(results_option(func)))
    for option in reversed(options):
        func = option(func)
    command = click.command(task.name, help=doc, short_help=summary)(backbone_options(func))
    command.params.extend(_option(name, spec) for name, spec in sorted(task.params.items()))
    return command


def _check_save_probe(task: Task, kw: dict[str, Any], flag: str = "--save-probe") -> None:
    """Refuse ``--save-probe`` (or ``--push-to``) before anything runs where there is no one
    head to save."""
    task.shape_spec.check_saves_head(task.name)  # VisBench's refusal, also before the run
    if kw.get("seeds", 1) > 1:
        raise UsageError(f"{flag} takes one head, and --seeds trains one per seed",
                         hint="drop --seeds, or save a seed's head with `vbstore export head`")
    if kw.get("head"):
        raise UsageError(f"{flag} takes the head this run trains, and --apply-head trains "
                         "none", hint="`vbstore export head` writes a stored head")


def _remote(store, name: str):
    """The configured remote ``name``, or None."""
    from ..remotes import list_remotes

    return next((c for c in list_remotes(store) if c.name == name), None)


def _check_push_to(store, remote: str, public: bool) -> None:
    """Refuse ``--push-to`` to a remote that is not configured, and ``--public`` off the Hub,
    before anything runs."""
    config = _remote(store, remote)
    if config is None:
        raise UsageError(f"--push-to {remote}: no such remote",
                         hint=f"add it first: vbstore remote add {remote} hf://NAMESPACE/REPO "
                              "(or a folder, or s3://BUCKET/PREFIX)")
    if public and not config.model_card:
        raise UsageError("--public makes a Hub repository readable by anyone; "
                         f"{remote} is no Hub repository", hint="drop --public")


def _push_probe(store, task: Task, result, remote: str, public: bool) -> None:
    """Name the trained head ``probes/TASK/RESULT`` and push it to ``remote`` with
    :func:`vbstore.heads.push_head` (on the Hub: a model card with the result's metrics)."""
    from ..heads import push_head

    head = result.record.inputs["head"]
    name = f"probes/{task.name}/{result.id[:12]}"
    store.tag(name, head)
    on_hub = _remote(store, remote).model_card
    pushed = push_head(store, name, remote, private=False if public else None,
                       metrics_from=result.id if on_hub else None)
    click.echo(f"pushed the trained head {head[:12]} as {name} to {remote} "
               f"({len(pushed.push.uploaded)} files sent)", err=True)


def _check_no_cache(kw: dict[str, Any]) -> None:
    """Refuse what ``--no-cache`` would read from or leave in the store it does not touch."""
    # --push-to too: the scratch store has none of this store's remotes
    for flag, key in (("--notes", "notes"), ("--apply-head", "head"), ("--dry-run", "dry_run"),
                      ("--push-to", "push_to")):
        if kw.get(key):
            raise UsageError(f"--no-cache computes in a scratch store, and {flag} reads or "
                             "writes this one", hint=f"drop {flag} or --no-cache")


class TaskGroup(VbstoreGroup):
    """A group with one generated subcommand per registered task."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list_tasks()

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        try:
            return _command(get_task(cmd_name))
        except VbstoreError:
            return None


@click.group(cls=TaskGroup, name="run")
def run_group() -> None:
    """Run a probe TASK with its settings as flags (`vbstore run TASK --help`)."""
