"""The fields of a request: one table, spelled as flags by the CLI and as keywords by Python.

Each :class:`Field` row says once what a setting is called on each front end, its default, its
type and its help. The CLI generates its options from the rows (``vbstore.cli._fields``); the
keyword functions (:func:`vbstore.get_result`, ``get_head``, ``get_features``, ``sweep``) take
``**options`` and read them into a frozen options type whose defaults come from the same rows
(:func:`opt`), so a keyword no row names is refused as Python refuses one (``TypeError``).

An error about a setting names its field, never a spelling
(``UsageError(f"{field_ref('seed')} ...")``, ``vbstore.errors.field_ref``). The error keeps the
reference; the CLI prints it as ``--seed``, the Python API as ``seed=`` (:func:`spell_flag`,
:func:`spell_keyword`). A task parameter is ``field_ref("param:k")``: ``-p k=...`` on the
command line, ``params={'k': ...}`` in Python; a data option's keyword is an entry of
``data_options``.

```python
@dataclass(frozen=True)
class HeadOptions:
    train_split: str | None = opt("train_split")
    seed: int = opt("seed")
```
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

POOLINGS = ("cls", "mean", "gap")
PRECISIONS = ("fp32", "bf16")
# vbstore.data.LAYOUTS, without importing it
LAYOUTS = ("image_folder", "dense", "stems", "list", "triplets", "pairs", "images", "spair",
           "voc", "coco", "nyu", "taskonomy", "navi")


@dataclass(frozen=True)
class Field:
    """One setting of a request, as each front end spells it.

    Attributes:
        name: The keyword argument (and the CLI's parameter name).
        flag: The command-line flag (``--input-size``); None: Python only.
        help: The flag's help text.
        default: The value when neither front end is given one.
        kind: ``str``, ``int``, ``float``, ``bool`` (a flag that takes no value) or a tuple
            of choices.
        minimum: The least value an ``int``/``float`` takes (a click range on the CLI).
        maximum: The greatest such value.
        min_open: ``minimum`` itself is refused.
        short: The flag's one-letter spelling (``-b``).
        within: The keyword that holds it in Python (``data_options``), when not its own.
        show_default: The CLI's help shows the default.
        metavar: The CLI's name of the value.
        multiple: The flag repeats (``-p k=5 -p lr=0.1``).
        required: The CLI requires the flag.
        negated: The flag turns the keyword off (``--no-strict`` is ``strict=False``).
    """

    name: str
    flag: str | None
    help: str = ""
    default: Any = None
    kind: Any = str
    minimum: float | None = None
    maximum: float | None = None
    min_open: bool = False
    short: str | None = None
    within: str | None = None
    show_default: bool = False
    metavar: str | None = None
    multiple: bool = False
    required: bool = False
    negated: bool = False

    def but(self, **changes: Any) -> Field:
        """This row with ``changes`` (a command's own help or choices for the same setting)."""
        return dataclasses.replace(self, **changes)


def _rows(*rows: Field) -> dict[str, Field]:
    return {row.name: row for row in rows}


_FINETUNE_HELP = ("Train the backbone's last N blocks with the head (classification, multilabel, "
                  "the trained dense and box probes); the frozen blocks' output is stored once, "
                  "and the result is never ranked with a frozen one (docs/finetune.md).")

FIELDS: dict[str, Field] = _rows(
    # the backbone and how it is seen
    Field("backbone", "--backbone", short="-b", required=True,
          help="Backbone spec: torchvision:resnet18, timm:NAME, dinov2:dinov2_vits14, "
               "open_clip:MODEL@TAG, or a registered name (vbstore list backbones)."),
    Field("weights", "--weights", default="default", show_default=True,
          help="default (pinned pretrained), a pretrained tag, a checkpoint path, or random."),
    Field("backbone_seed", "--backbone-seed", kind=int,
          help="Init seed for --weights random (default 0); an error with other weights."),
    Field("input_size", "--input-size", kind=int, help="Override the input resolution."),
    Field("layers", "--layers",
          help="Comma-separated block indices (negative from the end); default -1."),
    Field("precision", "--precision", default="fp32", kind=PRECISIONS, show_default=True,
          help="Compute precision; bf16 is faster on recent CPUs/GPUs but changes the numbers."),
    Field("pooling", "--pooling", kind=POOLINGS,
          help="Pooled vector a pooled task reads (default: the backbone's own; VisBench's "
               "cls|mean)."),
    # the probe
    Field("task", "--task", short="-t",
          help="Probe task (vbstore list tasks); with --suite, the suite's."),
    Field("params", "--param", short="-p", multiple=True, metavar="KEY=VALUE",
          help="A task parameter, e.g. -p k=10 -p temperature=0.05 (see vbstore list tasks)."),
    Field("seed", "--seed", default=0, kind=int, show_default=True,
          help="Seed of the probe's training."),
    Field("seeds", "--seeds", default=1, kind=int, minimum=1, show_default=True,
          help="Run N seeds on one set of features; report mean, std, min, max and a 95% "
               "t-interval over the seeds (the probe's randomness; the eval sample's is the "
               "bootstrap CI every result carries)."),
    Field("finetune_blocks", "--finetune-blocks", default=0, kind=int, minimum=0,
          show_default=True, help=_FINETUNE_HELP),
    Field("backbone_lr", "--backbone-lr", kind=float,
          help="Peak learning rate of the fine-tuned blocks [default: the task's lr / 100]."),
    Field("language", "--language",
          help="CLIP_benchmark's --language: of cb: data (its class names, templates, "
               "captions) and of a zero-shot task's prompts (-p language)."),
    Field("head", "--head", help="Apply this stored head (id or ref) instead of training one."),
    Field("strict", "--no-strict", default=True, kind=bool, negated=True,
          help="Apply a mismatched head anyway (warns; the result is comparable with nothing)."),
    # the data
    Field("data", "--data", short="-d",
          help="Evaluation data: a folder, a .csv/.jsonl list, sklearn:digits, shapes; with "
               "--suite, the suite's unless its data is elsewhere."),
    Field("split", "--split", help="Split of --data to evaluate on (val, test...)."),
    Field("train_data", "--train-data", help="Training data for tasks that fit a head."),
    Field("train_split", "--train-split", help="Split of --train-data to train on."),
    Field("limit", "--limit", kind=int, minimum=1,
          help="Per-class (or total) cap on eval samples."),
    Field("train_limit", "--train-limit", kind=int, minimum=1,
          help="The same cap for training data."),
    # the layout flags, gathered into data_options (vbstore.cli._dataopts)
    *(Field(name, f"--{name.replace('_', '-')}", within="data_options", **row)
      for name, row in (
        ("layout", {"kind": LAYOUTS, "help": "Override layout detection."}),
        ("stems", {"help": "Official list of sample stems, one per line (VOC style); a path "
                           "under the working directory, else under --data."}),
        ("train_stems", {"help": "Stems list of the train split (used instead of --stems "
                                 "there; the training split when no --train-split is given)."}),
        ("image_dir", {"help": "Image folder of a stems layout (default JPEGImages)."}),
        ("target_dir", {"help": "Target folder of a stems layout (default SegmentationClass)."}),
        ("target", {"help": "Target folder of a dense split with several (masks, depth...)."}),
        ("target_type", {"help": "Record this target type instead of the folder name."}),
        ("classes", {"help": "Class names, one per line, in index order: of a sample list, or "
                             "of box annotations (default: the VOC classes, or classes.txt)."}),
        ("splits", {"help": "Taskonomy split CSV: building,train,val,test rows of 0/1."}),
        ("dataset_root", {"help": "Folder torchvision:NAME reads its files from; for cb:NAME "
                                  "also a URL or a {dataset_cleaned} template "
                                  "(CLIP_benchmark's)."}),
        ("custom_template_file", {"help": "cb: data: CLIP_benchmark's per-dataset templates "
                                          "JSON (its --custom_template_file; cupl_prompts.json: "
                                          "its CuPL prompts)."}),
        ("custom_classname_file", {"help": "cb: data: CLIP_benchmark's per-dataset class names "
                                           "JSON (its --custom_classname_file)."}),
        ("download", {"kind": bool, "help": "Let hf: and torchvision: data fetch what is not on "
                                            "this machine."}),
        ("image_column", {"help": "The image column of hf: data (default: detected)."}),
        ("label_column", {"help": "The label or caption column of hf: data (default: "
                                  "detected)."}),
        ("min_votes", {"kind": int, "minimum": 0,
                       "help": "2AFC triplets: keep those with at least this many votes "
                               "(default 6, VisBench's --min-votes)."}),
        # VisBench's NAVI pair draw (docs/data.md); given, it replaces the reader's own pairs
        ("partners", {"kind": int, "minimum": 1,
                      "help": "NAVI: partners drawn per train anchor (VisBench's draw; "
                              "default 1)."}),
        ("max_angle", {"kind": float, "minimum": 0.0, "maximum": 180.0, "min_open": True,
                       "help": "NAVI: largest rotation a pair may span, degrees (VisBench's; "
                               "120)."}),
        ("pair_seed", {"kind": int, "minimum": 0,
                       "help": "NAVI: seeds VisBench's partner draw (default 8)."}),
        ("stride", {"kind": int, "minimum": 1,
                    "help": "NAVI: keep every Nth anchor of VisBench's draw (default 1)."}),
      )),
    Field("data_options", None),
    Field("notes", "--notes", metavar="TEXT",
          help="Free text to attach to the result (VisBench's --notes): kept in the registry, "
               "shown by show, why and export results; no part of the result's id, so a stored "
               "result takes it without computing again."),
    # features
    Field("mode", "--mode", default="pooled", kind=("pooled", "dense", "both"),
          show_default=True, help="Keep pooled vectors, dense maps (float16), or both."),
    Field("dense_dtype", None, default="float16"),
    Field("use_projection", None, default=False, kind=bool),
    # how it runs: no id depends on these
    Field("store", None),
    Field("device", "--device", help="cpu, cuda, cuda:1... (default: cuda if available)."),
    Field("progress", None, default=True),
    Field("recompute", "--recompute", default=False, kind=bool,
          help="Compute the result afresh (heads retrained, features reused); exit 12 if it did "
               "not reproduce."),
    Field("executor", "--executor"),
    Field("batch_size", "--batch-size", default=32, kind=int, minimum=1, show_default=True,
          help="Images per forward pass (extraction; changes no id). The head's batch is "
               "--train-batch-size."),
    Field("workers", None, default=2, kind=int, minimum=0),
    Field("loader", None, default="threads"),
)


def opt(name: str) -> Any:
    """A dataclass field whose default is row ``name``'s (the row rides in its metadata)."""
    row = FIELDS[name]
    return dataclasses.field(default=row.default, metadata={"row": row})


def options_of(kind: type[Any], keywords: Mapping[str, Any], caller: str,
               without: tuple[str, ...] = ()) -> Any:
    """``kind(**keywords)``, once :func:`check_keywords` found each a field of ``kind``.

    Raises:
        TypeError: ``caller`` takes no keyword of that name.
    """
    check_keywords(kind, keywords, caller, without)
    return kind(**keywords)


def check_keywords(kind: type[Any], keywords: Mapping[str, Any], caller: str,
                   without: tuple[str, ...] = ()) -> None:
    """Refuse, in ``caller``'s name and as Python refuses one, a keyword that names no field
    of dataclass ``kind`` (or one of ``without``, fields ``caller`` does not take).

    Raises:
        TypeError: ``caller`` takes no keyword of that name.
    """
    names = {f.name for f in dataclasses.fields(kind)}
    for key in keywords:
        if key not in names or key in without:
            raise TypeError(f"{caller}() got an unexpected keyword argument {key!r}")


def split_keywords(keywords: Mapping[str, Any], *kinds: type[Any]) -> list[dict[str, Any]]:
    """``keywords`` dealt to ``kinds`` by their field names (the first that has one takes it);
    a keyword none has stays in the last, to be refused there."""
    out: list[dict[str, Any]] = [{} for _ in kinds]
    for key, value in keywords.items():
        index = next((i for i, kind in enumerate(kinds)
                      if key in {f.name for f in dataclasses.fields(kind)}), len(kinds) - 1)
        out[index][key] = value
    return out


def spell_flag(name: str, value: str | None) -> str:
    """Field ``name`` as the command line says it: ``--input-size``, ``--target depth``,
    ``-p k=5``."""
    if name.startswith("param:"):
        return f"-p {name[6:]}" + ("" if value is None else f"={value}")
    row = FIELDS[name]
    flag = row.flag or name
    return flag if value is None else f"{flag} {value}"


def spell_keyword(name: str, value: str | None) -> str:
    """Field ``name`` as a caller of Python says it: ``input_size=``, ``strict=False``,
    ``params={'k': 5}``, ``data_options={'target': 'depth'}``."""
    if name.startswith("param:"):
        return f"params={{'{name[6:]}': {'...' if value is None else value}}}"
    row = FIELDS[name]
    if row.within is not None:
        shown = "..." if value is None else repr(value)
        return f"{row.within}={{'{name}': {shown}}}"
    if row.negated:
        return f"{name}=False"
    if row.kind is bool and value is None:
        return f"{name}=True"
    return f"{name}=" + ("" if value is None else str(value))
