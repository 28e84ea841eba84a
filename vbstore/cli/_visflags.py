"""VisBench's probe flags, with VisBench's meanings, for ``get result`` (``run TASK`` makes its
flags from the task's parameters, under the same names).

Each flag sets one task parameter, as ``-p NAME=VALUE`` does; a flag and ``-p`` that set one
parameter to different values are refused (neither wins), and a flag whose parameter the task
does not have is refused with the task's parameters named. ``--batch-size`` is not here: as in
VisBench it is the extraction batch, an engine option that changes no id; the head's training
batch is ``--train-batch-size``, the task parameter ``batch_size``. ``--min-votes`` is a data
option (it chooses the triplets a manifest holds), among the layout flags.
"""

from __future__ import annotations

from typing import Any

import click

from ..errors import UsageError
from ._fields import field_option

# flag (without --) -> (task parameter, click type, help)
FLAGS: dict[str, tuple[str, Any, str]] = {
    "train-batch-size": ("batch_size", click.IntRange(min=1),
                         "Batch of the head's training (VisBench's flag; -p batch_size)."),
    "n-bins": ("n_bins", click.IntRange(min=2), "depth: bins of the depth head (-p n_bins)."),
    "score-threshold": ("score_threshold", click.FloatRange(min=0.0, max=1.0),
                        "detection: keep boxes scoring at least this (-p score_threshold)."),
    "nms-iou": ("nms_iou", click.FloatRange(min=0.0, max=1.0),
                "detection: per-class NMS IoU (-p nms_iou)."),
    "max-detections": ("max_detections", click.IntRange(min=1),
                       "detection: boxes kept per image (-p max_detections)."),
    "fewshot-k": ("fewshot_k", click.IntRange(min=-1),
                  "linear_probe: training samples per class, -1 every one (CLIP_benchmark's "
                  "--fewshot_k; -p fewshot_k)."),
    "units": ("units", click.Choice(("pixel", "patch")),
              "correspondence: unit of the errors and thresholds (-p units)."),
    "thresholds": ("thresholds", click.STRING,
                   "correspondence: error thresholds, e.g. 1,2,5,10; they name the metrics "
                   "(-p thresholds)."),
    "min-box-size": ("min_box_size", click.FloatRange(min=0.0),
                     "detection: drop target boxes smaller than this on a side, in input pixels "
                     "after the crop (-p min_box_size)."),
    "metric": ("metric", click.Choice(("cosine", "l2")),
               "retrieval: rank by cosine similarity or l2 distance (-p metric)."),
    "topk": ("topk", click.STRING,
             "retrieval: the k of recall@k, e.g. 1,5,10; they name the metrics (-p topk)."),
    "val-proportion": ("val_proportion", click.FloatRange(min=0.0, max=0.9),
                       "linear_probe: share of the train split held out to search the weight "
                       "decay, 0 none (CLIP_benchmark's --val_proportion; -p val_proportion)."),
}
# flags CLIP_benchmark spells with underscores: its spelling is an alias (--fewshot_k)
CB_SPELLED = ("fewshot-k", "val-proportion")


def flag_of(name: str) -> str:
    """The flag that sets task parameter ``name`` (``batch_size``: ``--train-batch-size``)."""
    for flag, (param, _, _) in FLAGS.items():
        if param == name:
            return f"--{flag}"
    return f"--{name.replace('_', '-')}"


def probe_flag_options(func):
    """``get result``'s VisBench flags: the extraction batch, pooling, and one flag per task
    parameter of :data:`FLAGS` (``--standardize`` included)."""
    options = [
        field_option("batch_size"),
        field_option("pooling"),
        click.option("--standardize/--no-standardize", "standardize", default=None,
                     help="classification: standardise features before the head "
                          "(-p standardize)."),
    ]
    options += [click.option(f"--{flag}",
                             *([f"--{flag.replace('-', '_')}"] if flag in CB_SPELLED else []),
                             f"vb__{param}", type=kind, default=None, help=text)
                for flag, (param, kind, text) in FLAGS.items()]
    options.append(click.option(
        "--load-clfs", "--load_clfs", "vb__load_clfs", multiple=True, metavar="FILE[,FILE]",
        callback=lambda ctx, param, value: ",".join(value) if value else None,
        help="zeroshot_classification, zeroshot_multilabel: score with these classifier files "
             "(CLIP_benchmark's --save_clf output; several are averaged) instead of the text "
             "tower; repeat the flag or separate with commas (its --load_clfs; -p load_clfs)."))
    for option in reversed(options):
        func = option(func)
    return func


def flag_params(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The task parameters the flags of :func:`probe_flag_options` set, popped from ``kwargs``."""
    out = {key.removeprefix("vb__"): kwargs.pop(key) for key in list(kwargs)
           if key.startswith("vb__")}
    out["standardize"] = kwargs.pop("standardize", None)
    return {k: v for k, v in out.items() if v is not None}


def merge(task_name: str, given: dict[str, Any], flags: dict[str, Any]) -> dict[str, Any]:
    """``given`` (the ``-p`` parameters) with the flags' parameters added.

    Raises:
        UsageError: a flag names a parameter the task does not have, or disagrees with ``-p``.
        UnknownTask: no task has that name.
    """
    from ..tasks import get_task  # the registry loads when the command runs

    task = get_task(task_name)
    out = dict(given)
    for name, value in sorted(flags.items()):
        flag = flag_of(name)
        if name not in task.params:
            valid = ", ".join(sorted(task.params)) or "none"
            raise UsageError(f"{flag} does not apply to task {task_name!r} (its parameters: "
                             f"{valid})", hint=f"drop {flag}")
        if name in out and (task.resolve_params({name: out[name]})[name]
                            != task.resolve_params({name: value})[name]):
            raise UsageError(f"{flag} {value} and -p {name}={out[name]} disagree",
                             hint=f"give {name} once: the flag or -p")
        out[name] = value
    return out


def results_option(func):
    """``--results FILE``: VisBench's flag, one record appended per run (docs/results.md)."""
    return click.option(
        "--results", "results_file", type=click.Path(dir_okay=False), default=None,
        metavar="FILE",
        help="Append the result as one VisBench 0.27 record (a JSONL line its read_records "
             "loads) to FILE, also when it came from the store; VisBench's --results.")(func)


def append_results(store, result_id: str, path: str | None) -> None:
    """Append result ``result_id``'s VisBench record to ``path`` (nothing when None), as
    VisBench's writer does: one line, parent folders made, flushed to disk."""
    if path is None:
        return
    # the interop code loads only for a command given --results
    import os
    from pathlib import Path

    from ..interop import visbench_export, visbench_lines  # (as above)

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(visbench_lines(visbench_export(store, [result_id])))
        handle.flush()
        os.fsync(handle.fileno())


save_clf_option = click.option(
    "--save-clf", "--save_clf", "save_clf", type=click.Path(dir_okay=False), default=None,
    metavar="FILE",
    help="Write the zero-shot classifier scored with, the (D, C) class-embedding matrix, to "
         "FILE with torch.save, as CLIP_benchmark's --save_clf does (its --load_clfs reads it; "
         "so does --load-clfs); also when the result came from the store.")


def save_classifier_to(plan, path: str | None) -> None:
    """Write ``plan``'s zero-shot classifier to ``path`` (nothing when None), as
    CLIP_benchmark's ``--save_clf`` writes it (:func:`vbstore.engine.save_classifier`)."""
    if path is None:
        return
    from ..engine import save_classifier  # torch: only for a command given --save-clf

    save_classifier(plan, path)


def check_save_clf(task: str, path: str | None, dry_run: bool) -> None:
    """Refuse ``--save-clf`` before anything runs: with ``--dry-run`` (nothing is run to
    save), or for a task that scores with no zero-shot classifier."""
    if path is None:
        return
    if dry_run:
        raise UsageError("--save-clf writes the classifier a run scores with; --dry-run runs "
                         "nothing", hint="drop --dry-run or --save-clf")
    from ..engine import check_saves_classifier  # the task registry: torch-free

    check_saves_classifier(task)
