"""CLIP_benchmark's conventions: ``model,pretrained`` lines and one result JSON per run.

CLIP_benchmark (LAION, MIT) reads model lists whose lines are ``MODEL,PRETRAINED`` (an
OpenCLIP model name and pretrained tag) and writes, per run, a JSON object with exactly the
fields ``dataset``, ``model``, ``pretrained``, ``task``, ``metrics`` and ``language``, named
``{dataset}_{pretrained}_{model}_{language}_{task}.json`` (its ``--output`` template). Its
linear probe is vbstore's ``linear_probe`` task, whose metrics keep its names and come with
the settings it writes beside them (``weight_decay``, ``epochs``, ``seed``, ``fewshot_k``,
``normalized``); vbstore's own ``classification`` probe is exported under that task too, its
``top1``/``top5`` as ``lp_acc1``/``lp_acc5``. Its zero-shot tasks share vbstore's task and
metric names. ``dataset`` is the dataset's name: a named source's (``cifar10``,
``wds/NAME``), else the name the data was read under (a folder's, ``store.data_names``).

Those fields name weights only as an open_clip ``MODEL`` and ``PRETRAINED`` tag, and neither the
harness version nor the data. A vbstore export adds ``vbstore_version`` (the vbstore that
computed the result) and ``vbstore_manifest`` (the id of the manifest of the samples it scored),
and one field CLIP_benchmark ignores, ``vbstore``: the :class:`WeightsIdentity` (spec,
weights kind, seed of a random init, tensor hash), which an import reads back exactly. A row
without it is read as CLIP_benchmark's own (``open_clip:MODEL@PRETRAINED``, pretrained) only
when nothing in it says otherwise; any other row is refused (:class:`UnidentifiedWeights`),
never relabelled pretrained.
"""

from __future__ import annotations

import re
import string
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..backbones import list_backbones, parse_spec
from ..data import data_prefixes
from ..errors import LeftOutWarning, UnidentifiedWeights, UsageError, VbstoreError, field_ref
from ..records import ManifestRecord, ResultRecord, WeightsRecord
from ..tasks import DATASET_TEMPLATES, TEMPLATES
from ._cb_collections import DATASET_COLLECTIONS

if TYPE_CHECKING:
    from ..store import Store

CLIP_BENCHMARK_FIELDS = ("dataset", "model", "pretrained", "task", "metrics", "language")
IDENTITY_FIELD = "vbstore"  # vbstore's own field in an exported row; CLIP_benchmark ignores it
# what else an export says that CLIP_benchmark's rows lack (the harness version and the dataset
# revision, the gaps its README admits): the vbstore that computed the result, and the id of the
# manifest of the samples it scored
PROVENANCE_FIELDS = ("vbstore_version", "vbstore_manifest")
WEIGHTS_KINDS = ("pretrained", "fixed", "checkpoint", "random")
_HASH = re.compile(r"[0-9a-f]{64}")
# data a dataset list may name as vbstore reads it, not as a CLIP_benchmark dataset name
# `pretrained` values only vbstore writes: weights that are not an open_clip tag's
_VBSTORE_MARK = re.compile(r"(random|fixed|checkpoint|default)(-seed[0-9]+|-[0-9a-f]{12})?")
# open_clip also takes a file as `pretrained`: a checkpoint, not a published tag
_CHECKPOINT_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt", ".safetensors", ".npz")
# CLIP_benchmark runs multi-label sets (voc2007_multilabel) under zeroshot_classification
_TASKS = {"classification": "linear_probe", "zeroshot_multilabel": "zeroshot_classification"}
# (classification computes no mean per-class recall: its rows carry no lp_mean_per_class_recall)
_METRICS = {
    "classification": {"top1": "lp_acc1", "top5": "lp_acc5"},
}


def clip_benchmark_datasets(path: str | Path) -> list[str]:
    """The data of a CLIP_benchmark dataset list (its ``--dataset FILE``: one dataset per line)
    or collection (``vtab``, ``vtab+``, ``imagenet_robustness``, ``retrieval``,
    ``sugar_crepe``), as vbstore data: a name CLIP_benchmark builds is ``cb:NAME``; a line that
    already is vbstore data (a folder or list that exists, ``hf:``, ``torchvision:``, ``cb:``...)
    is kept.

    Raises:
        UsageError: neither a readable file nor a collection, or a file that lists nothing.
    """
    if str(path) in DATASET_COLLECTIONS and not Path(path).exists():
        return [f"cb:{name}" for name in DATASET_COLLECTIONS[str(path)]]
    if not Path(path).exists():
        raise UsageError(f"{path!r} is neither a file nor a CLIP_benchmark dataset collection",
                         hint="one of " + ", ".join(DATASET_COLLECTIONS)
                         + ", or a file with one dataset name per line")
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the dataset list {path}: {exc}",
                         hint="one CLIP_benchmark dataset name per line, e.g. cifar10") from None
    out = []
    for line in lines:
        name = line.split("#", 1)[0].strip()
        if not name:
            continue
        prefix = name.partition(":")[0]
        prefixes = data_prefixes()  # vbstore's own data: kept as written
        keep = (Path(name).expanduser().exists() or name in prefixes
                or (":" in name and prefix in prefixes))
        out.append(name if keep else f"cb:{name}")
    if not out:
        raise UsageError(f"{path} lists no datasets", hint="one dataset name per line")
    return out


def clip_benchmark_spec(line: str) -> str:
    """The open_clip spec of a CLIP_benchmark ``MODEL,PRETRAINED`` line.

    Raises:
        UsageError: not exactly two non-empty comma-separated fields.
    """
    parts = [part.strip() for part in line.split(",")]
    if len(parts) != 2 or not all(parts):
        raise UsageError(f"{line!r} is not a MODEL,PRETRAINED line",
                         hint="e.g. ViT-B-32-quickgelu,laion400m_e32")
    model, pretrained = parts
    return f"open_clip:{model}@{pretrained}"


# CLIP_benchmark's --output template, and the fields it fills it with
DEFAULT_TEMPLATE = "{dataset}_{pretrained}_{model}_{language}_{task}.json"
TEMPLATE_FIELDS = ("dataset", "pretrained", "pretrained_full_path", "model", "language", "task")
# what its linear probe writes beside its metrics: from the record's params and seed
_LP_SETTINGS = ("epochs", "fewshot_k")


def _source(manifest: ManifestRecord | None) -> dict[str, Any]:
    """The manifest's ``source`` record (where a named source read it from), or {}."""
    return (manifest.extra.get("source") if manifest is not None else None) or {}


def _dataset(manifest: ManifestRecord | None, manifest_id: str, named: str | None) -> str:
    source = _source(manifest)
    name = source.get("name")
    if not name:
        # a folder: the name it was read under, else (a store from before names) its content id
        return named or manifest_id[:12]
    if source.get("kind") == "torchvision":
        return name.lower()  # CLIP_benchmark's names for torchvision sets: cifar10, mnist...
    if source.get("kind") == "wds":
        return f"wds/{name}"
    return name


@dataclass(frozen=True)
class WeightsIdentity:
    """Which weights made a number: what an evaluation's checkpoint is built from.

    Attributes:
        spec: The backbone spec (``test_vit``, ``open_clip:ViT-B-32@openai``).
        weights: ``pretrained``, ``fixed``, ``checkpoint`` or ``random``.
        tensor_hash: The weights' tensor identity (docs/backbones.md); None only for a
            CLIP_benchmark row of its own, named by its open_clip model and tag alone.
        seed: The init seed of ``random`` weights, else None.
    """

    spec: str
    weights: str
    tensor_hash: str | None = None
    seed: int | None = None

    @classmethod
    def of(cls, record: ResultRecord, weights: WeightsRecord | None) -> WeightsIdentity | None:
        """The identity of a ``result`` and its ``weights`` record; None where one is unknown."""
        spec, kind = record.spec, record.weights_kind
        tensor_hash = weights.tensor_hash if weights is not None else None
        seed = weights.seed if weights is not None and weights.origin == "random" else None
        if not spec or kind not in WEIGHTS_KINDS or not isinstance(tensor_hash, str) \
                or not _HASH.fullmatch(tensor_hash) or (kind == "random") != (seed is not None):
            return None
        return cls(spec, kind, tensor_hash, seed)

    @classmethod
    def read(cls, field: Any, where: str) -> WeightsIdentity:
        """The identity an export wrote (:meth:`as_dict`), checked.

        Raises:
            UnidentifiedWeights: a field missing, of the wrong type, or a kind it does not fit.
        """
        if not isinstance(field, dict):
            raise UnidentifiedWeights(where, f"its {IDENTITY_FIELD!r} field is not an object")
        spec, kind = field.get("spec"), field.get("weights")
        tensor_hash, seed = field.get("tensor_hash"), field.get("seed")
        if not isinstance(spec, str) or not spec:
            why = "no backbone spec"
        elif kind not in WEIGHTS_KINDS:
            why = f"weights {kind!r} is not one of {', '.join(WEIGHTS_KINDS)}"
        elif not isinstance(tensor_hash, str) or not _HASH.fullmatch(tensor_hash):
            why = "no 64-hex tensor_hash"
        elif kind == "random" and (not isinstance(seed, int) or isinstance(seed, bool)):
            why = "random weights without their integer seed"
        elif kind != "random" and seed is not None:
            why = f"a seed given for {kind} weights"
        else:
            return cls(spec, kind, tensor_hash, seed)
        raise UnidentifiedWeights(where, f"its {IDENTITY_FIELD!r} field has {why}")

    def as_dict(self) -> dict[str, Any]:
        """The ``vbstore`` field an export writes."""
        return {"spec": self.spec, "weights": self.weights, "seed": self.seed,
                "tensor_hash": self.tensor_hash}

    def checkpoint(self) -> dict[str, str]:
        """An evaluation's ``checkpoint``: the tensor hash (else the spec), label and kind."""
        label = self.spec if self.seed is None else f"{self.spec} seed={self.seed}"
        return {"id": self.tensor_hash or self.spec, "label": label, "weights": self.weights}

    def pretrained_tag(self, tag: str | None) -> str:
        """CLIP_benchmark's ``pretrained`` for these weights: the tag, or what they are."""
        if self.weights == "pretrained":
            return tag or "default"
        if self.weights == "random" and self.seed is not None:
            return f"random-seed{self.seed}"  # two inits are two checkpoints, as in suites
        if self.weights == "checkpoint" and self.tensor_hash:
            return f"checkpoint-{self.tensor_hash[:12]}"
        return self.weights


def _model(spec: str) -> tuple[str, str | None]:
    """CLIP_benchmark's ``model`` for a spec, and the spec's pretrained tag."""
    try:
        parsed = parse_spec(spec)
    except VbstoreError:  # a plugin unregistered since: its spec still names it
        return spec, None
    arch, tag = parsed.arch, parsed.tag
    if parsed.source == "timm" and tag is None and "." in arch:
        arch, tag = arch.split(".", 1)
    model = arch if parsed.source == "open_clip" else f"{parsed.source}:{arch}"
    if parsed.source == "custom":
        model = parsed.name
    return model, tag


def _linear_probe_settings(record: ResultRecord) -> dict[str, Any]:
    """What CLIP_benchmark's linear probe writes beside its three metrics."""
    out: dict[str, Any] = {k: record.params[k] for k in _LP_SETTINGS if k in record.params}
    decay = (record.train_metrics or {}).get("weight_decay")
    if isinstance(decay, (int, float)):
        out["weight_decay"] = decay
    if record.seed is not None:
        out["seed"] = record.seed
    out["normalized"] = True
    return out


def clip_benchmark_record(record: ResultRecord, manifest: ManifestRecord | None = None,
                          weights: WeightsRecord | None = None, *,
                          dataset: str | None = None) -> dict[str, Any]:
    """A vbstore ``result`` record as the JSON CLIP_benchmark writes for one run.

    Args:
        record: The result record.
        manifest: Its evaluation manifest (names the dataset when it has a ``source``).
        weights: Its ``weights`` record: with it the row carries the ``vbstore`` field that
            an import reads the weights back from; without it an import refuses the row
            (unless it is a pretrained open_clip model's).
        dataset: The name the eval data was read under (``store.data_names``), for a manifest
            with no source; without one its id's first 12 characters stand in.

    Raises:
        UsageError: a fine-tuned result: CLIP_benchmark's rows are frozen probes, and its
            format has no field that would keep it from being read (and ranked) as one.
    """
    if record.finetune:
        raise UsageError(
            f"a {record.task} result with fine-tuned blocks ({record.finetune}) cannot be a "
            "CLIP_benchmark row: the format has only frozen probes, and it would read as one",
            hint="export it with --format jsonl or csv (they carry the finetune column)")
    task = record.task
    rename = _METRICS.get(task, {})
    metrics = {rename.get(k, k): v for k, v in record.metrics.items()
               if isinstance(v, (int, float))}
    if task == "linear_probe":
        metrics.update(_linear_probe_settings(record))
    identity = WeightsIdentity.of(record, weights)
    model, tag = _model(record.spec)
    pretrained = (identity or WeightsIdentity(record.spec, record.weights_kind or "pretrained")
                  ).pretrained_tag(tag)
    manifest_id = record.eval_data.get("manifest") or record.inputs.get("eval_manifest", "")
    doc = {
        "dataset": _dataset(manifest, manifest_id, dataset),
        "model": model,
        "pretrained": pretrained,
        "task": _TASKS.get(task, task),
        "metrics": metrics,
        # a task's prompts' language, else the language cb: data was read in (linear_probe)
        "language": record.params.get("language") or _source(manifest).get("language") or "en",
    }
    if identity is not None:
        doc[IDENTITY_FIELD] = identity.as_dict()
    version = (record.versions or {}).get("vbstore")
    if version:
        doc["vbstore_version"] = version
    if manifest_id:
        doc["vbstore_manifest"] = manifest_id
    return doc


def clip_benchmark_identity(row: Mapping[str, Any], where: str, *,
                            vouched: str | None = None) -> WeightsIdentity:
    """The weights a CLIP_benchmark result row names, or a refusal; never a guess.

    A row with a ``vbstore`` field (a vbstore export) is that identity, if its ``model`` and
    ``pretrained`` agree with it. A row without one is CLIP_benchmark's own: the open_clip
    ``MODEL@PRETRAINED`` pretrained weights, unless it names a vbstore backbone or weights no
    tag names (vbstore's ``random``/``checkpoint``... marks, an empty tag, a file path).
    ``vouched`` (``import results --weights``) stands in for what a path or empty tag leaves
    unsaid; it cannot contradict the file.

    Raises:
        UnidentifiedWeights: the row does not say which weights made it.
        UsageError: ``vouched`` contradicts the row's ``vbstore`` field.
    """
    model, pretrained = row.get("model"), row.get("pretrained")
    if IDENTITY_FIELD in row:
        identity = WeightsIdentity.read(row[IDENTITY_FIELD], where)
        if not _agrees(identity, model, pretrained):
            raise UnidentifiedWeights(
                where, f"model/pretrained {model},{pretrained} contradict its {IDENTITY_FIELD!r} "
                f"field ({identity.spec}, {identity.weights} weights)")
        if vouched is not None and vouched != identity.weights:
            raise UsageError(f"{where} says its weights are {identity.weights}, not {vouched}",
                             hint=f"drop {field_ref('weights')}: this file names its weights "
                                  "itself")
        return identity
    if not isinstance(model, str) or not model or not isinstance(pretrained, str):
        raise UnidentifiedWeights(where, "model or pretrained is missing or not text")
    # a source prefix, or a registered name (test_vit...): vbstore's backbones, never open_clip's
    if (":" in model and not model.startswith("hf-hub:")) or model in list_backbones():
        raise UnidentifiedWeights(where, f"{model} is a vbstore backbone, not an open_clip model, "
                                  f"and the row has no {IDENTITY_FIELD!r} field")
    if _VBSTORE_MARK.fullmatch(pretrained):
        raise UnidentifiedWeights(where, f"pretrained {pretrained!r} is vbstore's mark for weights "
                                  "no tag names, and the row has no "
                                  f"{IDENTITY_FIELD!r} field")
    if vouched is None and (not pretrained.strip() or "/" in pretrained or "\\" in pretrained
                            or pretrained.lower().endswith(_CHECKPOINT_SUFFIXES)):
        raise UnidentifiedWeights(
            where, f"pretrained {pretrained!r} is not an open_clip tag",
            hint="nothing was imported; if it is a checkpoint file open_clip loaded, vouch for "
            f"it with {field_ref('weights', 'checkpoint')}")
    return WeightsIdentity(f"open_clip:{model}@{pretrained}", vouched or "pretrained")


def _agrees(identity: WeightsIdentity, model: Any, pretrained: Any) -> bool:
    """Whether a row's names could be the export's for ``identity`` (an edit shows)."""
    names = _model(identity.spec)
    if (model, pretrained) == (names[0], identity.pretrained_tag(names[1])):
        return True
    # exported where the registry read the spec otherwise (a plugin this vbstore lacks): the
    # names must still come from the spec
    if not isinstance(model, str) or not model or model not in identity.spec:
        return False
    if identity.weights != "pretrained":
        return pretrained == identity.pretrained_tag(None)
    return isinstance(pretrained, str) and (pretrained == "default" or pretrained in identity.spec)


def check_template(template: str) -> str:
    """``template`` if it is a CLIP_benchmark ``--output`` template vbstore can fill.

    Raises:
        UsageError: an unknown or positional field, or a path that leaves the folder.
    """
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise UsageError(f"bad file name template {template!r}: {exc}",
                         hint=f"e.g. benchmark_{DEFAULT_TEMPLATE}") from None
    unknown = sorted({f for f in fields if f not in TEMPLATE_FIELDS})
    if unknown:
        raise UsageError(f"the file name template {template!r} has no field {unknown[0]!r}",
                         hint="fields: " + ", ".join("{" + f + "}" for f in TEMPLATE_FIELDS))
    parts = template.replace("\\", "/").split("/")
    if template.startswith("/") or ".." in parts:
        raise UsageError(f"the file name template {template!r} leaves the export folder",
                         hint="name files inside it, e.g. " + DEFAULT_TEMPLATE)
    return template


def clip_benchmark_filename(doc: Mapping[str, Any], template: str = DEFAULT_TEMPLATE) -> str:
    """The file CLIP_benchmark names a run's JSON by: its ``--output`` template filled with the
    row's fields (``/`` in a value read as ``_``, ``:`` as ``-``, so one value is one name).

    Raises:
        UsageError: a template :func:`check_template` refuses.
    """
    def slug(value: Any) -> str:
        return str(value).replace("/", "_").replace(":", "-")

    values = {name: slug(doc[name]) for name in ("dataset", "pretrained", "model", "language",
                                                  "task")}
    values["pretrained_full_path"] = values["pretrained"]
    return check_template(template).format(**values)


def _entries(store: Store, value: Any) -> list[str] | None:
    """The entries of a template or class-name file a result's parameter names by blob id."""
    if isinstance(value, str) and _HASH.fullmatch(value) and store.has(value):
        loaded = store.read_json(value)
        if isinstance(loaded, list):
            return [str(v) for v in loaded]
    return None


def prompts_of(store: Store, record: ResultRecord, manifest: ManifestRecord | None
               ) -> tuple[list[str] | None, list[str] | None]:
    """The class names and templates a result's prompts were made of, as CLIP_benchmark's
    ``--dump_classnames`` / ``--dump_templates`` write them: a class-name file's entries, else
    CLIP_benchmark's own names of ``cb:`` data, else the data's classes; a template file's
    entries, the data's templates (``templates=dataset``) or the built-in set's. None where the
    result used none (a task without prompts, data without classes)."""
    source = _source(manifest)
    classnames = (_entries(store, record.params.get("classnames"))
                  or source.get("classnames")
                  or (list(manifest.classes) if manifest is not None and manifest.classes
                      else None))
    chosen = record.params.get("templates")
    language = str(record.params.get("language") or "en")
    templates = _entries(store, chosen)
    if templates is None and chosen == DATASET_TEMPLATES:
        templates = source.get("templates")
    if templates is None and isinstance(chosen, str):
        builtin = TEMPLATES.get(language, {}).get(chosen)
        templates = list(builtin) if builtin else None
    return classnames, templates


def clip_benchmark_export(store: Store, result_ids: Iterable[str],
                          template: str = DEFAULT_TEMPLATE, *, dump_classnames: bool = False,
                          dump_templates: bool = False) -> list[dict[str, Any]]:
    """One CLIP_benchmark row per stored result: ``{"id", "file", "record"}``, in id order.

    ``file`` is CLIP_benchmark's name for the row, from its ``--output`` ``template``; two
    results it would name alike (seeds, limits...) get their id's first 12 characters
    appended. ``dump_classnames`` / ``dump_templates`` add ``classnames`` / ``templates``
    (:func:`prompts_of`) where the result has them, as CLIP_benchmark's flags of those names do.

    CLIP_benchmark's rows are frozen probes: a fine-tuned result among frozen ones is left out
    with a :class:`~vbstore.errors.LeftOutWarning` naming how many, so a mixed store still
    exports; fine-tuned results alone are refused (the CLI and the Python API alike).

    Raises:
        UsageError: a template :func:`check_template` refuses; only fine-tuned results.

    ```python
    rows = clip_benchmark_export(store, [info.id for info in store.ls("result")])
    ```
    """
    check_template(template)
    records = {oid: ResultRecord.from_dict(store.read_json(oid)) for oid in sorted(result_ids)}
    frozen = {oid: r for oid, r in records.items() if not r.finetune}
    if frozen and len(frozen) < len(records):
        warnings.warn(f"left out {len(records) - len(frozen)} fine-tuned result(s): "
                      "CLIP_benchmark's rows are frozen probes (--format jsonl or csv carries "
                      "them)", LeftOutWarning, stacklevel=2)
        records = frozen
    out, names = [], set()
    for oid, record in records.items():
        manifest_id = record.eval_data.get("manifest")
        manifest = (ManifestRecord.from_dict(store.read_json(manifest_id))
                    if manifest_id and store.has(manifest_id) else None)
        weights_id = record.inputs.get("weights")
        weights = (WeightsRecord.from_dict(store.read_json(weights_id))
                   if weights_id and store.has(weights_id) else None)
        named = store.data_names.of(manifest_id) if manifest_id else []
        row = clip_benchmark_record(record, manifest, weights,
                                    dataset=named[0] if named else None)
        if dump_classnames or dump_templates:
            classnames, templates = prompts_of(store, record, manifest)
            if dump_classnames and classnames:
                row["classnames"] = classnames
            if dump_templates and templates:
                row["templates"] = templates
        name = clip_benchmark_filename(row, template)
        if name in names:
            stem, dot, suffix = name.rpartition(".")
            name = f"{stem}_{oid[:12]}.{suffix}" if dot else f"{name}_{oid[:12]}"
        names.add(name)
        out.append({"id": oid, "file": name, "record": row})
    return out
