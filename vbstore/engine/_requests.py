"""Requests: what a user asks the engine for, as frozen, validated values.

The Python API and the CLI build the same three objects, so a flag and a keyword argument are
checked once, in one place. Task parameters live in their own mapping: a task parameter can
never be mistaken for an engine option (``-p seed=3`` is refused with the flag to use).

```python
request = ResultRequest(
    BackboneRequest("test_vit", weights="random"),
    ProbeRequest("knn", params={"k": 10}),
    DataRef("shapes", split="val"), DataRef("shapes", split="train"))
plan = vbstore.engine.plan(request)      # torch-free: what is stored, what will be computed
result = vbstore.engine.execute(plan)
```
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .. import canonical
from .._budget import check_input_size
from .._fields import PRECISIONS
from ..backbones import check_seed
from ..errors import UsageError, field_ref
from ..store import Store
from ..tasks import Task, get_task

_OID = re.compile(r"[0-9a-f]{64}")

# Engine options a user might try to pass as a task parameter: named as the field to use.
ENGINE_OPTIONS = frozenset({
    "seed", "seeds", "weights", "backbone_seed", "input_size", "layers", "precision", "device",
    "split", "train_split", "limit", "train_limit", "strict", "recompute", "finetune_blocks",
    "backbone_lr",
})


def _int(name: str, value: Any, minimum: int, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(f"{name} must be an integer >= {minimum}, not {value!r}")


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class BackboneRequest:
    """Which backbone, with which weights, seen how.

    Attributes:
        spec: A spec string (``torchvision:resnet18``, ``test_vit``...) or a built Backbone.
        weights: ``default`` (pinned pretrained), a pretrained tag, a checkpoint path, or
            ``random``.
        seed: Init seed with ``weights="random"`` (None: 0); refused with other weights.
        input_size: Overrides the model's input resolution.
        layers: Block indices to extract (negative from the end).
        pooling: Overrides the pooled vector (default: what the task asks for).
        precision: ``fp32`` or ``bf16``.
    """

    spec: Any
    weights: str = "default"
    seed: int | None = None
    input_size: int | None = None
    layers: tuple[int, ...] = (-1,)
    pooling: str | None = None
    precision: str = "fp32"

    def __post_init__(self) -> None:
        if isinstance(self.spec, str) and not self.spec.strip():
            raise UsageError(
                "a backbone spec is empty", hint=f"e.g. {field_ref('backbone')} "
                                                 "torchvision:resnet18"
            )
        object.__setattr__(self, "weights", str(self.weights))
        _int("backbone seed", self.seed, 0, optional=True)
        check_seed(self.weights, self.seed)
        _int("input size", self.input_size, 1, optional=True)
        if self.input_size is not None:  # before any data is read or stored for the request
            check_input_size(self.input_size, forward=False)
        layers = (self.layers,) if isinstance(self.layers, int) else tuple(self.layers or (-1,))
        if any(isinstance(i, bool) or not isinstance(i, int) for i in layers):
            raise UsageError(
                f"layers must be integers, not {self.layers!r}",
                hint=f"e.g. {field_ref('layers', '2,5,8,11')}"
            )
        if len(set(layers)) != len(layers):
            raise UsageError(f"layers {list(layers)} name a layer twice")
        object.__setattr__(self, "layers", layers)
        if self.precision not in PRECISIONS:
            raise UsageError(
                f"precision must be one of {', '.join(PRECISIONS)}, not {self.precision!r}"
            )

    @property
    def label(self) -> str:
        """The backbone in a few words, for progress lines: ``test_vit random seed=1``."""
        name = self.spec if isinstance(self.spec, str) else getattr(self.spec, "name", "backbone")
        if self.weights == "random":
            return f"{name} random seed={self.seed or 0}"
        return name if self.weights == "default" else f"{name} {self.weights}"


@dataclass(frozen=True)
class DataRef:
    """A split of a dataset: a folder, a list file or a named source, with layout options.

    Attributes:
        source: A folder, a ``.csv``/``.jsonl`` list, ``sklearn:digits``, ``shapes``...
        split: The split to read (``train``, ``val``...), when the data has splits.
        limit: Per-class (or total) cap on samples.
        options: Layout options (``layout``, ``stems``, ``target``...; see
            ``vbstore.data.OPTIONS``).
    """

    source: Any
    split: str | None = None
    limit: int | None = None
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if self.source is None or (isinstance(self.source, str) and not self.source.strip()):
            raise UsageError("no data given", hint=f"pass {field_ref('data', 'PATH')} (a folder, a "
                                                   "list, or shapes)")
        _int("limit", self.limit, 1, optional=True)
        object.__setattr__(self, "options", _frozen(self.options))

    def described(self) -> tuple[str, dict[str, Any]]:
        """The data's name and its parameters, as a record carries them (VisBench's
        ``dataset``, ``dataset_params``): a folder or list file by its own name (the path
        above it is this machine's, not the data's), a named source by its name with its
        options (``scenes:per_split=6`` -> ``scenes``, ``{"per_split": "6"}``), then the
        layout options and the limit."""
        source, params = self.source, dict[str, Any]()
        if isinstance(source, Path) or (isinstance(source, str) and Path(source).exists()):
            name = Path(source).resolve().name
        elif isinstance(source, str):
            head, colon, tail = source.partition(":")
            items = tail.split(",") if colon else []
            if items and all("=" in item for item in items):
                name = head
                params.update(item.partition("=")[::2] for item in items)
            else:
                name = source
        else:  # an object (a dataset a plugin built): its type, never its address
            name = type(source).__name__
        params.update({k: v for k, v in self.options.items() if _plain(v)})
        if self.limit is not None:
            params["limit"] = self.limit
        return name, params


def _plain(value: Any) -> bool:
    """A JSON scalar or a list of them: what a record can carry as a dataset parameter."""
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, (str, int, float, bool))


@dataclass(frozen=True)
class ProbeRequest:
    """Which probe, with which settings.

    Attributes:
        task: A registered task name (``vbstore list tasks``).
        params: Task parameters; defaults fill the rest, unknown names are refused.
        seed: Seed of the first run; ``seeds`` runs use ``seed, seed+1, ...``.
        seeds: How many seeds to run on one set of features.
        head: A stored head (id or ref) to apply instead of training one.
        strict: Refuse a head trained for other features (off: warn, and compare with nothing).
        finetune_blocks: Train the backbone's last N blocks with the head (0: a frozen probe;
            docs/finetune.md). A fine-tuned result is another measurement, never ranked with a
            frozen one.
        backbone_lr: Peak learning rate of those blocks (None: the task's ``lr`` / 100).
    """

    task: str
    params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    seed: int = 0
    seeds: int = 1
    head: str | None = None
    strict: bool = True
    finetune_blocks: int = 0
    backbone_lr: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", _frozen(self.params))
        _int("seed", self.seed, 0)
        _int("seeds", self.seeds, 1)
        _int("finetune blocks", self.finetune_blocks, 0)
        if self.backbone_lr is not None:
            lr = self.backbone_lr
            if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr < 1e6:
                raise UsageError(f"backbone lr must be a number > 0, not {lr!r}",
                                 hint=f"e.g. {field_ref('backbone_lr', '1e-4')}")
            if not self.finetune_blocks:
                raise UsageError(
                    f"{field_ref('backbone_lr', format(lr, 'g'))} was given without "
                    f"{field_ref('finetune_blocks')}, so no block "
                    "would train with it", hint=f"add {field_ref('finetune_blocks')} N, or drop "
                                                f"{field_ref('backbone_lr')}")
            object.__setattr__(self, "backbone_lr", float(lr))
        if self.finetune_blocks and self.head is not None:
            raise UsageError(f"{field_ref('finetune_blocks')} trains blocks with a new head; a "
                             "given head "
                             "brings its own", hint=f"drop {field_ref('finetune_blocks')} or "
                                                    f"{field_ref('head')}")

    def finetune(self, task_params: Mapping[str, Any]) -> dict[str, Any] | None:
        """``{"blocks", "backbone_lr"}`` of a fine-tuning request (the lr resolved against the
        task's own ``lr``), or None for a frozen probe."""
        if not self.finetune_blocks:
            return None
        lr = self.backbone_lr
        if lr is None:
            lr = float(task_params.get("lr", 0.0)) / 100
        if not lr > 0:
            raise UsageError(f"task {self.task!r} has no lr to take the backbone's from",
                             hint=f"pass {field_ref('backbone_lr')}")
        return {"blocks": self.finetune_blocks, "backbone_lr": lr}

    @property
    def spec(self) -> Task:
        """The registered task.

        Raises:
            UnknownTask: no task has that name.
        """
        return get_task(self.task)

    def resolved_params(self, data: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Every task parameter, defaults filled and values normalised.

        ``data``: the data options of the task's target kind (``target_scale``) that the data
        states; a task parameter of that name takes it unless ``params`` gives one.

        Raises:
            UsageError: an unknown parameter (an engine option named with its flag) or a bad value.
        """
        task = self.spec
        for key in self.params:
            if key in ENGINE_OPTIONS and key not in task.params:
                raise UsageError(
                    f"{key!r} is not a parameter of task {task.name!r} but an option "
                    "of vbstore itself",
                    hint=f"use {field_ref(key)} instead of "
                         f"{field_ref('param:' + key, '...')}",
                )
        stated = {k: v for k, v in (data or {}).items() if k in task.params}
        return task.resolve_params({**stated, **self.params})

    @property
    def seed_list(self) -> list[int]:
        return [self.seed + i for i in range(self.seeds)]


@dataclass(frozen=True)
class ResultRequest:
    """A probe's metrics for a backbone on data: everything ``plan`` needs.

    Attributes:
        backbone: The backbone request.
        probe: The probe request.
        data: The evaluation split.
        train: The training split (tasks that fit a head, unless ``probe.head`` is given).
        notes: Free text attached to the result (VisBench's ``notes``): a row of the
            registry (``store.notes``), never part of the result's document or key, so the same
            computation with other notes is the same result, answered from the store.
    """

    backbone: BackboneRequest
    probe: ProbeRequest
    data: DataRef
    train: DataRef | None = None
    notes: str | None = None

    def __post_init__(self) -> None:
        if self.notes is not None and not isinstance(self.notes, str):
            raise UsageError(f"notes must be text, not {type(self.notes).__name__}")
        if self.notes is not None and not self.notes.strip():
            object.__setattr__(self, "notes", None)  # empty notes say nothing
        # the task's shape says whether it takes training data and a head
        self.probe.spec.check_inputs(train=self.train is not None,
                                     head=self.probe.head is not None)
        self.probe.spec.shape_spec.check_pooling(self.probe.task, self.backbone.pooling)


@dataclass(frozen=True)
class HeadRequest:
    """A probe head trained on data: everything ``plan_head`` needs.

    Attributes:
        backbone: The backbone request.
        probe: The probe request (its ``head`` must be None: this asks for one).
        train: The training split.
    """

    backbone: BackboneRequest
    probe: ProbeRequest
    train: DataRef

    def __post_init__(self) -> None:
        self.probe.spec.shape_spec.check_trains(self.probe.task)
        if self.probe.head is not None:
            raise UsageError("a head request trains a head; it applies none",
                             hint=f"drop {field_ref('head')}")
        self.probe.spec.shape_spec.check_pooling(self.probe.task, self.backbone.pooling)


@dataclass(frozen=True)
class FeaturesRequest:
    """The features of a data split under a backbone: everything ``plan_features`` needs.

    Attributes:
        backbone: The backbone request (its ``layers``, ``pooling``, ``precision`` and
            ``input_size`` are the extractor's settings; pooling None: the backbone's own).
        data: The split to extract.
        mode: ``pooled`` vectors, ``dense`` maps, or ``both``.
        dense_dtype: How dense maps are stored (``float16`` unless asked otherwise).
        use_projection: A CLIP backbone's pooled vector through its image projection.
    """

    backbone: BackboneRequest
    data: DataRef
    mode: str = "pooled"
    dense_dtype: str = "float16"
    use_projection: bool = False


def store_param_files(store: Store, task: Task, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with every file a file parameter names replaced by the id of its entries.

    The entries (parsed and checked by the parameter's :class:`~vbstore.tasks.FileParam`) are
    stored as a canonical JSON list in a ``blob``, so two paths with the same content give one
    derivation key and an edited file gives another. A value that already is such an id (a
    record's params, replayed) is kept.

    Raises:
        UsageError: the value names no readable UTF-8 file, or the file's content is refused.
    """
    out = dict(params)
    for key, spec in task.params.items():
        value = out.get(key)
        if spec.file is None or not isinstance(value, str) or value in spec.file.names:
            continue
        kind = spec.file.kind
        if _OID.fullmatch(value) and store.has(value) and store.info(value).kind == kind:
            continue
        if spec.file.load is not None:  # tensor files: read (torch) and checked by the task's
            out[key] = store.put_bytes(spec.file.load(value), kind)
            continue
        assert spec.file.parse is not None  # a text file param
        builtin = ", ".join(n for n in spec.file.names if n)
        try:
            text = Path(value).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            what = "no readable UTF-8 file" if builtin == "" else (
                f"neither a built-in set ({builtin}) nor a readable UTF-8 file")
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8"
            raise UsageError(f"{key} {value!r} is {what} ({reason})",
                             hint=f"{key}: {spec.help}") from None
        out[key] = store.put_bytes(canonical.dumps(spec.file.parse(text)), "blob")
    return out


def param_files(store: Store, task: Task, params: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The stored entries of each file parameter that names one, by parameter name (a
    tensor file parameter's through its ``entries``: the compute path, torch)."""
    files: dict[str, list[Any]] = {}
    for key, spec in task.params.items():
        value = params.get(key)
        if spec.file is None or not isinstance(value, str) or not _OID.fullmatch(value):
            continue
        if spec.file.entries is not None:
            files[key] = spec.file.entries(store.read_bytes(value, verify=True))
        else:
            files[key] = [str(entry) for entry in canonical.loads(store.read_bytes(value))]
    return files


def layers_arg(layers: Sequence[int] | int | None) -> tuple[int, ...]:
    """``--layers`` as given (None: the last block)."""
    if layers is None:
        return (-1,)
    return (layers,) if isinstance(layers, int) else tuple(layers)
