"""Target kinds: what a split's targets are, declared once.

A *target kind* (``class_index``, ``depth_map``, ``boxes``...) is what a task declares it reads
(``Task.target_kind``) and what a split holds. Each kind is one :class:`TargetKind` in this
registry: its description, the layouts and folder names that carry it, how its per-sample
targets are read (pooled tasks) or its per-pixel targets read, decoded and given the image's
resize and crop (dense tasks), its data options (``target_scale``...) and the check that refuses
a split before anything is stored. A user's new kind registers through
:func:`register_target_kind`, as the built-ins below do.

A manifest records its ``target_type``: how a list or folder labels its images (``class``,
``multi_label``, ``captions``...), a layout's own kind (``boxes``, ``pairs``, ``triplets``), or,
for per-pixel targets, the target folder's name. The folder names of the datasets vbstore reads
(scenes, NYUv2, Taskonomy, VOC) say what their files hold, so a task can refuse a split of the
wrong kind before a feature is extracted (``semantic_segmentation`` on depth maps). A name no
kind claims (``target_type=`` declares one) is not judged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BadInput, UsageError
from ._files import subdirs

# Local imports: numpy and the decoders (._targets, ._boxes) load where targets are read; a
# cached `get` only looks kinds up by name.

# a dataset's own statement of its targets' data options, beside its split folders
TARGETS_FILE = "targets.json"


@dataclass(frozen=True)
class DataOption:
    """A per-kind data option: a fact about how the data stores its targets.

    Attributes:
        name: The option (``target_scale``); a task parameter of that name receives it.
        help: One line for the docs and errors.
    """

    name: str
    help: str


@dataclass(frozen=True)
class BaselineQuestion:
    """What a kind's trivial baseline is asked (``TargetKind.baseline``).

    Attributes:
        eval_targets: The eval split's targets (tensors or lists).
        train_targets: The train split's (None: the constant comes from the eval split's own,
            as for a stored head applied to new data).
        class_count: The number of classes, when the data names them.
        captions: For caption targets, each eval image's captions.
        trained: The task trains a head (the majority class); False: zero-shot (chance, a
            random ranking).
        metrics: The names of the metrics the task declares.
    """

    eval_targets: Any
    train_targets: Any = None
    class_count: int | None = None
    captions: Sequence[Sequence[str]] | None = None
    trained: bool = True
    metrics: frozenset[str] = frozenset()


@dataclass(frozen=True)
class TargetKind:
    """One kind of target, declared once.

    Attributes:
        name: What a task declares (``target_kind = "depth_map"``).
        description: In words (``depth maps``), for errors and help.
        layout: The data layout that carries it, in words (``vbstore run TASK --help``).
        folders: ``target_type`` values and target folder names (lower case) that hold it.
        prefixes: Folder-name prefixes that hold it (NYUv2's ``labels_40``...).
        also_reads: Other kinds of data a task of this kind reads (``*``: any).
        per_pixel: Read by dense tasks, a target per pixel (or per box) of the backbone's input.
        read: Per-pixel kinds: ``(reader, position) -> array`` for row ``position`` of a dense
            split, read, decoded and given the image's resize and crop (:class:`TargetReader`).
        per_sample: Pooled kinds: ``(manifest, classes) -> array`` of the split's targets
            (None: the targets come another way, e.g. captions in a zero-shot context).
        rows_index_features: Each target row names feature rows (triplets, pairs): a bootstrap
            draws target rows alone.
        options: The data options its data may need (``target_scale``).
        check: ``(target_files, options) -> None``: refuses, at plan time, a split whose targets
            cannot be read with these options (a depth PNG without its scale); None: any.
        layout_options: ``(options, source) -> options``: the layout options a split of this
            kind is read with by default (``images``: the images alone).
        min_classes: The fewest classes data of this kind must list for a probe to measure
            anything (``class_index``: 2, since with one every prediction is right); checked
            at plan time on the class list of the train split, else the eval split; 0: none.
        drawn: How ``vbstore show DATA --task T`` draws a per-pixel target beside its image:
            ``labels`` (class indices), ``scalar`` (a map), ``rgb`` ((3, H, W) unit vectors),
            ``boxes`` (rows ``x0, y0, x1, y1, class, difficult``); empty: the image alone.
        check_targets: Pooled kinds: ``(y, n, split, n_classes) -> y``: the targets a task is
            given, checked against its ``n`` feature rows (``n_classes`` when known) and
            returned as it computes with them; raises ``TaskInputError``. None: a tensor with
            one finite row per feature row (``vbstore.data._target_rows.rows``). Called inside
            task calls only, where torch is loaded.
        check_array: Pooled kinds: the same check in numpy, returning an array, for a task
            that scores stored rows without torch (``array = "numpy"``); None: no such task
            reads this kind.
        baseline: ``(BaselineQuestion) -> (metrics, predictor, classes) | None``: the kind's
            trivial predictor on the eval split, from the targets alone
            (``vbstore.tasks.targets_baseline`` asks, and keeps the task's declared metrics).
            None: the kind has none (a dense task scores its own constant map).
        dense_shape: The probe shape a task reading dense features of this kind runs when it
            declares none (``boxes``; ``pairs``, whose maps are pooled to a grid of vectors).
    """

    name: str
    description: str
    layout: str
    folders: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    also_reads: tuple[str, ...] = ()
    per_pixel: bool = False
    read: Callable[[Any, int], Any] | None = None
    per_sample: Callable[[Any, Any], Any] | None = None
    rows_index_features: bool = False
    options: tuple[DataOption, ...] = ()
    check: Callable[[list[Path], Mapping[str, Any]], None] | None = None
    layout_options: Callable[[dict[str, Any], Any], dict[str, Any]] = field(
        default=lambda options, source: options)
    drawn: str = ""
    min_classes: int = 0
    check_targets: Callable[[Any, int, str, int | None], Any] | None = None
    check_array: Callable[[Any, int, str, int | None], Any] | None = None
    baseline: Callable[[BaselineQuestion], Any] | None = None
    dense_shape: str = ""

    def reads(self, data_kind: str) -> bool:
        """Whether a task declaring this kind reads targets of ``data_kind``."""
        return "*" in self.also_reads or data_kind in (self.name, *self.also_reads)

    def reads_strictly(self) -> tuple[str, ...]:
        """The kinds of data made for this kind (its own and ``also_reads``, never ``*``)."""
        return tuple(k for k in (self.name, *self.also_reads) if k != "*")

    def option_names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.options)


_KINDS: dict[str, TargetKind] = {}


def register_target_kind(kind: TargetKind) -> TargetKind:
    """Register ``kind`` (a user's kind goes through here, as the built-ins do).

    Raises:
        UsageError: the name is taken, or a folder name is claimed by another kind.
    """
    if kind.name in _KINDS:
        raise UsageError(f"target kind {kind.name!r} is already registered",
                         hint="register yours under another name")
    for folder in kind.folders:
        owner = next((k.name for k in _KINDS.values() if folder.lower() in k.folders), None)
        if owner is not None:
            raise UsageError(f"target folder {folder!r} already means {owner}",
                             hint="name your kind's folders otherwise")
    if kind.per_pixel and kind.read is None:
        raise UsageError(f"per-pixel target kind {kind.name!r} declares no read")
    _KINDS[kind.name] = kind
    return kind


def get_target_kind(name: str) -> TargetKind:
    """The registered kind ``name``.

    Raises:
        UsageError: no such kind (the message lists them).
    """
    _builtins()
    try:
        return _KINDS[name]
    except KeyError:
        raise UsageError(f"unknown target kind {name!r}",
                         hint=f"kinds: {', '.join(sorted(_KINDS))}") from None


def list_target_kinds() -> list[str]:
    """The registered kinds' names, sorted."""
    _builtins()
    return sorted(_KINDS)


def _builtins() -> None:
    """Register the built-in kinds: ``_kinds_builtin`` and every ``_kind_<name>.py`` module
    beside it (a new built-in kind is one such module)."""
    if "class_index" not in _KINDS:
        import importlib

        for name in ["_kinds_builtin", *sorted(p.stem for p in
                                               Path(__file__).parent.glob("_kind_*.py"))]:
            importlib.import_module(f".{name}", __package__)


def target_kind(target_type: str | None) -> str | None:
    """The kind of targets a ``target_type`` names; None when no kind claims it."""
    if target_type is None:
        return None
    _builtins()
    name = target_type.lower()
    if name == "none":
        return None
    for kind in _KINDS.values():
        if name in kind.folders:
            return kind.name
    return next((kind.name for kind in _KINDS.values()
                 if any(name.startswith(p) for p in kind.prefixes)), None)


def describe_kind(name: str | None) -> str:
    """A kind in words (its name when unknown)."""
    _builtins()
    kind = _KINDS.get(name or "")
    return kind.description if kind is not None else str(name)


# the folder that holds the images, per layout, beside the target folders
_IMAGE_DIRS = {"dense": "images", "nyu": "rgb", "taskonomy": "rgb"}


@dataclass(frozen=True)
class TargetsSeen:
    """A split's targets as listed, before any file is hashed or anything stored.

    Attributes:
        target_type: As the manifest will record it.
        kind: :func:`target_kind` of it (None: not judged).
        folders: The other target folders beside the images, by name, with their kinds (dense,
            NYUv2 and Taskonomy layouts; empty for others): what ``--target`` could pick.
        options: The data options the dataset states for these targets (its
            ``targets.json``), e.g. ``{"target_scale": 1000.0}`` for scenes' depth PNGs.
    """

    target_type: str
    kind: str | None
    folders: dict[str, str | None]
    options: dict[str, Any] = field(default_factory=dict)


def stated_options(root: Path, target_type: str) -> dict[str, Any]:
    """The data options a dataset states for its ``target_type`` targets: ``targets.json`` in
    the split folder or the dataset folder above it, ``{"<target folder>": {"target_scale":
    1000}}``.

    Raises:
        BadInput: the file is not such a JSON object.
    """
    for folder in (root, root.parent):
        path = folder / TARGETS_FILE
        if not path.is_file():
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise BadInput("an unreadable targets.json", [(str(path), str(exc))]) from None
        entry = doc.get(target_type, {}) if isinstance(doc, dict) else None
        if not isinstance(entry, dict):
            raise BadInput("a targets.json that is not {target folder: {option: value}}",
                           [(str(path), f"{target_type}: {entry!r}")])
        return dict(entry)
    return {}


def targets_seen(layout: str, root: Path, target_type: str) -> TargetsSeen:
    """The :class:`TargetsSeen` of a scanned split (``root``: the split's folder)."""
    image_dir = _IMAGE_DIRS.get(layout)
    folders = ({name: target_kind(name) for name in subdirs(root) if name != image_dir}
               if image_dir is not None and root.is_dir() else {})
    options = stated_options(root, target_type) if image_dir is not None else {}
    return TargetsSeen(target_type, target_kind(target_type), folders, options)


def __getattr__(name: str) -> Any:
    if name == "KIND_NAMES":  # kind -> description, as before the registry
        _builtins()
        return {k.name: k.description for k in _KINDS.values()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
