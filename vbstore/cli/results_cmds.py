"""``vbstore export results`` and ``vbstore sweep``: many results at once."""

from __future__ import annotations

import csv
import functools
import io
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import click

from .._fields import FIELDS
from ..engine import BASE_COLUMNS, RUN_COLUMNS, result_rows
from ..errors import LeftOutWarning, UsageError
from ._common import emit, json_option, with_store
from ._dataopts import data_layout_options, parse_params
from ._executoropts import executor_options
from ._fields import field_options
from ._visflags import FLAGS, flag_of

# Local imports: the library loads when a command runs, not with this module: listing the
# commands (--help) imports every command module, and a cached get loads only what it reads.


def _metric_columns(rows: list[dict[str, Any]]) -> list[str]:
    columns: list[str] = []
    for row in rows:  # only metrics some row has: no column that is empty for every row
        columns += [k for k in row
                    if k not in BASE_COLUMNS and k not in RUN_COLUMNS and k not in columns]
    return columns


def _markdown(rows: list[dict[str, Any]]) -> str:
    out = []
    for task in sorted({r["task"] for r in rows}):
        group = [r for r in rows if r["task"] == task]
        columns = BASE_COLUMNS[:1] + BASE_COLUMNS[2:] + _metric_columns(group)
        out += [f"## {task}", "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        for row in group:
            cells = [f"{row[c]:.4f}" if isinstance(row.get(c), float)
                     else "" if row.get(c) is None else str(row[c]) for c in columns]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


@click.group(name="export")
def export_group() -> None:
    """Export stored results as tables and heads as files."""


@export_group.command("results")
@click.option("--format", "fmt",
              type=click.Choice(["csv", "md", "jsonl", "clip-benchmark", "visbench"]),
              default="md", show_default=True,
              help="Table format (md: one table per task); clip-benchmark: one JSON per result "
              "as CLIP_benchmark writes it, into the folder -o, plus a `vbstore` field naming "
              "the weights (read back by `import results`); visbench: one VisBench 0.27 record "
              "per line, as its read_records loads them (docs/results.md).")
@click.option("--task", default=None, help="Only results of this task.")
@click.option("--backbone", default=None,
              help="Only backbones whose spec contains this (or id prefix).")
@click.option("--weights", type=click.Choice(["pretrained", "fixed", "checkpoint", "random"]),
              default=None,
              help="Only results with this kind of weights.")
@click.option("--output", "-o", type=click.Path(), default=None,
              help="Write here instead of stdout. clip-benchmark: a folder, or CLIP_benchmark's "
              "--output template, e.g. 'out/benchmark_{dataset}_{pretrained}_{model}_"
              "{language}_{task}.json'.")
@click.option("--dump-classnames", is_flag=True,
              help="clip-benchmark: add the class names the prompts used (CLIP_benchmark's "
                   "--dump_classnames).")
@click.option("--dump-templates", is_flag=True,
              help="clip-benchmark: add the prompt templates used (its --dump_templates).")
@json_option
@with_store
def export_results(store, fmt: str, task, backbone, weights, output, dump_classnames,
                   dump_templates, as_json: bool) -> None:
    """One table of stored results, with each task's own metric columns."""
    if (dump_classnames or dump_templates) and fmt != "clip-benchmark":
        raise UsageError("--dump-classnames and --dump-templates add fields to CLIP_benchmark's "
                         "rows", hint="add --format clip-benchmark")
    if output and fmt != "clip-benchmark" and Path(output).is_dir():
        raise UsageError(f"-o {output} is a folder; --format {fmt} writes one file",
                         hint=f"give a file name (-o results.{fmt.replace('visbench', 'jsonl')}"
                              "); only --format clip-benchmark writes into a folder")
    rows = result_rows(store, task, backbone, weights)
    if task and not rows:
        from ..tasks import get_task

        get_task(task)  # a misspelt task is refused with the closest name, not an empty table
    if fmt == "clip-benchmark":
        _export_clip_benchmark(store, rows, output, as_json, dump_classnames, dump_templates)
        return
    if fmt == "visbench":
        _export_visbench(store, rows, output, as_json)
        return
    if as_json:
        emit(True, rows)
        return
    if fmt == "jsonl":
        text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
    elif fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer,
                                fieldnames=BASE_COLUMNS + _metric_columns(rows) + RUN_COLUMNS,
                                lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        text = buffer.getvalue()
    else:
        text = _markdown(rows)
    if output:
        Path(output).write_text(text)
    else:
        click.echo(text, nl=False)


def _export_clip_benchmark(store, rows: list[dict[str, Any]], output: str | None,
                           as_json: bool, dump_classnames: bool = False,
                           dump_templates: bool = False) -> None:
    """One CLIP_benchmark-shaped JSON per result: files in the folder ``output``, else lines."""
    from ..interop import DEFAULT_TEMPLATE, clip_benchmark_export

    folder, template = _folder_and_template(output) if output else (None, DEFAULT_TEMPLATE)
    # what the export leaves out (fine-tuned results among frozen ones) it says as a warning,
    # printed here as the CLI's other warnings are
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", LeftOutWarning)
        docs = clip_benchmark_export(store, [store.resolve(row["id"]) for row in rows], template,
                                     dump_classnames=dump_classnames,
                                     dump_templates=dump_templates)
    for warning in said:
        click.echo(f"warning: {warning.message}", err=True)
    if folder is None:
        if as_json:
            emit(True, docs)
        else:
            click.echo("".join(json.dumps(d["record"]) + "\n" for d in docs), nl=False)
        return
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder} is a file", hint="clip-benchmark export writes into a folder")
    folder.mkdir(parents=True, exist_ok=True)
    for doc in docs:
        path = folder / doc["file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc["record"]))
    emit(as_json, docs, f"wrote {len(docs)} CLIP_benchmark result files to {folder}")


def _export_visbench(store, rows: list[dict[str, Any]], output: str | None,
                     as_json: bool) -> None:
    """VisBench's records, one line each, to ``output`` (written whole) or stdout."""
    from ..interop import visbench_export, visbench_lines

    docs = visbench_export(store, [store.resolve(row["id"]) for row in rows])
    if as_json:
        emit(True, docs)
        return
    if output:
        Path(output).write_text(visbench_lines(docs))
        click.echo(f"wrote {len(docs)} VisBench records to {output}", err=True)
    else:
        click.echo(visbench_lines(docs), nl=False)


def _folder_and_template(output: str) -> tuple[Path, str]:
    """``-o``: a folder (files get CLIP_benchmark's default names), or a path whose parts from
    the first ``{`` on are its ``--output`` template."""
    from ..interop import DEFAULT_TEMPLATE

    parts = Path(output).parts
    first = next((i for i, part in enumerate(parts) if "{" in part), None)
    if first is None:
        return Path(output), DEFAULT_TEMPLATE
    return Path(*parts[:first]) if first else Path("."), "/".join(parts[first:])


def sweep_progress_line(done: int, total: int, extracted: int, seconds: float) -> str:
    """The driver's line after each unit of a sweep on Ray: units, and images/s over all workers."""
    rate = extracted / seconds if seconds > 0 else 0.0
    return (f"sweep: {done}/{total} units done, {extracted} images extracted on the cluster, "
            f"{rate:.1f} images/s")


def _backbone_line_flags(func):
    """get result's backbone flags, hidden, refused with where a sweep takes them: each
    backbone's own line of the --backbones file."""
    flags = (("--weights", "weights"), ("--backbone-seed", "seed"), ("--input-size", "input_size"))

    @functools.wraps(func)
    def refuse(*args, **kwargs):
        for flag, key in flags:
            value = kwargs.pop(f"line_{key}")
            if value is not None:
                raise UsageError(f"sweep takes no {flag}: each backbone has its own, on its line "
                                 "of the --backbones file",
                                 hint=f"write it there, e.g. 'test_cnn {key}={value}'")
        return func(*args, **kwargs)

    for flag, key in reversed(flags):
        refuse = click.option(flag, f"line_{key}", default=None, hidden=True)(refuse)
    return refuse


@click.command()
@click.option("--backbones", "backbones_file", required=True,
              help="File with one backbone spec per line (optionally weights=, seed=, "
              "input_size=), or CLIP_benchmark's MODEL,PRETRAINED lines, or one of its model "
              "collections (openai, openclip_base, openclip_multilingual, openclip_all).")
@click.option("--tasks", required=True,
              help="Comma-separated tasks; auto: the task CLIP_benchmark's --task auto runs on "
                   "each dataset (retrieval on caption sets, else zero-shot classification).")
@field_options(FIELDS["data"].but(help="Evaluation data."))
@click.option("--datasets", "datasets_file", default=None,
              help="Instead of --data: CLIP_benchmark's dataset list, one dataset per line "
              "(a name is cb:NAME, read with --dataset-root; a folder or source as is), or one "
              "of its collections (vtab, vtab+, imagenet_robustness, retrieval, sugar_crepe); "
              "with --train-split, each dataset trains on its own train split.")
@field_options(
    FIELDS["split"].but(help="Split of --data to evaluate on."),
    FIELDS["train_data"].but(help="Training data (used by tasks that fit a head)."),
    "train_split",
    FIELDS["limit"].but(help="Per-class cap on eval samples."),
    FIELDS["train_limit"].but(help="Per-class cap on training samples."),
    FIELDS["seed"].but(help="Seed of each probe."),
    FIELDS["params"].but(help="A parameter for every task."),
)
@click.option("--fewshot-k", type=click.IntRange(min=-1), default=None,
              help="linear_probe: training samples per class, -1 every one (CLIP_benchmark's "
                   "--fewshot_k; -p fewshot_k).")
@field_options(FIELDS["language"].but(help="CLIP_benchmark's --language: of cb: data and of the "
                                           "zero-shot tasks' prompts (-p language)."))
@click.option("--model-type", default=None,
              help="CLIP_benchmark's --model_type: read the file's MODEL,PRETRAINED lines as "
              "models of this registered type (default open_clip).")
@field_options(
    FIELDS["pooling"].but(help="Pooled vector the pooled tasks read (default: each backbone's "
                               "own; dense tasks read their maps), as on get result."),
    "batch_size",
)
@click.option("--train-batch-size", type=FLAGS["train-batch-size"][1], default=None,
              help=FLAGS["train-batch-size"][2] + " For every task that trains with one.")
@data_layout_options
@executor_options
@json_option
@with_store
@_backbone_line_flags
def sweep(store, backbones_file, tasks, data, datasets_file, fewshot_k, model_type,
          train_batch_size, as_json, **options) -> None:
    """Every backbone x task combination; rerunning resumes, since finished results are cached.

    With --executor ray each combination missing from the store runs as a Ray task (one GPU, or
    CPUs, each) on the Ray workers of the store's machine; rows are printed as they finish, and
    several drivers may sweep one grid at once: each derivation is computed once.
    """
    from ..engine import read_backbones_file
    from ..engine import sweep as run_sweep

    if (data is None) == (datasets_file is None):
        raise UsageError("sweep evaluates on --data or on --datasets FILE",
                         hint="give exactly one of them")
    if datasets_file is not None:
        from ..interop import clip_benchmark_datasets

        if options.pop("train_data") is not None:
            raise UsageError("--datasets trains each dataset on its own train split",
                             hint="drop --train-data; name the split with --train-split")
        units = [(d, d if options["train_split"] else None)
                 for d in clip_benchmark_datasets(datasets_file)]
    else:
        units = [(data, options.pop("train_data"))]
    given = parse_params(options.pop("params"))
    for name, value in (("fewshot_k", fewshot_k), ("batch_size", train_batch_size)):
        if value is None:
            continue
        if given.get(name, value) != value:  # the flag and -p set one parameter: they must agree
            raise UsageError(f"{flag_of(name)} {value} and -p {name}={given[name]} disagree",
                             hint=f"give {name} once: the flag or -p")
        given[name] = value
    entries = read_backbones_file(backbones_file, model_type)
    rows, failures, extracted = [], 0, 0
    started = time.perf_counter()
    from ..interop import clip_benchmark_task

    asked = [t.strip() for t in tasks.split(",") if t.strip()]
    executor = options["executor"]
    grid = (row for evaluated, trained in units for row in run_sweep(
        entries, list(dict.fromkeys(clip_benchmark_task(str(evaluated)) if t == "auto" else t
                                    for t in asked)), evaluated, trained,
        params=given, store=store, progress=True,  # stderr: --json keeps it
        **options))
    for row in grid:
        rows.append(row)
        failures += "error" in row
        if as_json:
            continue
        where = f"[{row['done']}/{row['total']}] " if executor is not None else ""
        if datasets_file is not None:
            where += f"{row['data']:<20} "
        if "error" in row:
            click.echo(f"{where}{row['label']:<40} {row['task']:<22} error: {row['error']}")
        else:
            shown = ", ".join(f"{k}={v:.4f}" for k, v in row["metrics"].items())
            state = "cached" if row["from_cache"] else "computed"
            click.echo(f"{where}{row['label']:<40} {row['task']:<22} {state:<9} {shown}")
        if executor is not None:
            extracted += row.get("extracted", 0)
            click.echo(sweep_progress_line(row["done"], row["total"], extracted,
                                           time.perf_counter() - started), err=True)
    emit(as_json, rows)
    if failures:
        click.echo(f"{failures} of {len(rows)} combinations failed; fix what each error names, "
                   "then rerun (finished combinations are answered from the store)", err=True)
        sys.exit(1)
