"""``load_manifest``: the one way from a data argument to a stored manifest.

A data path alone never stands for a manifest (files change under the same path). What is
aliased is the listing plus every file's (dev, inode, size, mtime, ctime): an unchanged folder
maps straight to its manifest, at the cost of a directory walk and a ``stat`` per file; any
change to a file or to the listing misses and the manifest is rebuilt from the file-state cache.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import canonical
from ..errors import BadInput, CorruptObject, UsageError, VbstoreError, field_ref
from ..store import move_aside
from ._files import loose_images, subdirs
from ._kinds import TargetsSeen, targets_seen
from ._manifest import (
    build_document,
    check_limit,
    file_states,
    kept_entries,
    state_key,
    store_document,
)
from ._navi import DRAW_OPTIONS, check_draw, is_navi, scan_navi
from ._packaged import SOURCES, materialise, parse_source
from ._pairs import pairs_csv, scan_images, scan_pairs
from ._scan import (
    Scan,
    looks_paired,
    scan_coco,
    scan_dense,
    scan_image_folder,
    scan_stems,
    scan_voc,
)
from ._source_kinds import SOURCE_OPTIONS, check_source_options, is_source_kind, open_source
from ._spair import is_spair, scan_spair
from ._taskonomy import is_taskonomy, scan_taskonomy
from ._triplets import MIN_VOTES, scan_triplets, triplet_csv
from ._view import ManifestView

if TYPE_CHECKING:
    from ._sources import Source

# Local imports: the readers of box annotations, sample lists and external sources load when
# data in their layout is read, so a cached `get` on a folder of images does not pay for them.

LAYOUTS = ("image_folder", "dense", "stems", "list", "triplets", "pairs", "images", "spair",
           "voc", "coco", "nyu", "taskonomy", "navi")
# which layout options each layout accepts; anything else is refused, never ignored
_APPLIES = {
    "image_folder": (),
    "dense": ("target", "target_type", "classes"),
    "stems": ("stems", "train_stems", "image_dir", "target_dir", "target_type"),
    "list": ("classes", "target_type"),
    "triplets": ("min_votes",),
    "pairs": (),
    "images": (),
    "spair": (),
    "voc": ("classes", "stems", "train_stems"),
    "coco": ("classes",),
    "nyu": ("target", "target_type"),
    "taskonomy": ("target", "target_type", "splits"),
    "navi": ("partners", "max_angle", "pair_seed", "stride"),
}
OPTIONS = ("layout", *sorted({o for opts in _APPLIES.values() for o in opts}), *SOURCE_OPTIONS)
_VOC_DIRS = {"image_dir": "JPEGImages", "target_dir": "SegmentationClass"}
_LAYOUT_HELP = (
    "layouts: root/<split>/<class>/<image>, root/<class>/<image>, "
    f"root/<split>/{{images,<target>}}, a stems list ({field_ref('stems')}), a .csv/.jsonl "
    "list, root/data.csv of 2AFC triplets, root/pairs.csv of view pairs, a flat folder of images, "
    "SPair-71k, a VOC folder (Annotations/, ImageSets/Main/), COCO (annotations/instances_*.json), "
    "NYUv2 folders (root/<split>/{rgb,<target>}), Taskonomy (root/{rgb,<domain>}/<building>/), "
    "NAVI (root/<object>/<scene>/annotations.json)"
)


def load_manifest(
    store,
    data: str | Path,
    split: str | None = None,
    limit: int | None = None,
    *,
    touch: bool = True,
    **layout_options: Any,
) -> ManifestView:
    """Read a dataset split into a stored ``manifest`` and return it with its local root.

    Args:
        store: The :class:`vbstore.Store` to write the manifest into.
        data: A folder, a ``.csv``/``.jsonl`` sample list, a packaged source
            (``sklearn:digits``, ``skimage:samples``, ``shapes[:per_class=N,noise=X,...]``) or
            a dataset where it lives (``hf:NAME[@revision][:config]``, ``torchvision:NAME``,
            ``wds:PATH``).
        split: The split folder to read (``train``, ``val``...); needed when there are several.
        limit: Keep N samples per class (labelled data) or N in all (dense, stems, other
            lists), chosen by the hash of their names; recorded in the manifest.
        **layout_options: ``layout`` (one of :data:`LAYOUTS`; default: detected),
            ``stems``/``train_stems``/``image_dir``/``target_dir`` (stems lists; relative paths
            are under ``data``), ``target`` (the dense target folder; ``images``: the images
            alone, for targets derived from pixels), ``target_type``,
            ``classes`` (a list's class names in index order, or a file of them), ``splits``
            (Taskonomy's split CSV of buildings); for
            sources: ``dataset_root`` (torchvision), ``download`` (fetch what is not cached),
            ``image_column``/``label_column`` (hf).
        touch: Refresh a stored manifest's ``last_used`` (a registry write); the engine passes
            False and touches the manifests itself once it knows they are needed.

    Returns:
        The stored manifest, its id, and the absolute folder its sample names resolve against.

    Raises:
        UsageError: an unknown layout or option, an option the layout does not take, a missing
            or ambiguous split.
        BadInput: files no layout explains, empty classes, unpaired images and targets,
            missing, unreadable or corrupt files; the first paths and the count are named and
            nothing is written to the store.
    """
    return store_listing(store, list_split(store, data, split, limit, **layout_options),
                         touch=touch)


@dataclass(frozen=True)
class Listing:
    """A split as listed, before any file is hashed or anything stored: what
    :func:`store_listing` turns into its manifest, and whose targets a caller can judge first.

    Attributes:
        scan: The layout's listing of the split.
        source: The external source it came from, if any.
        limit: The per-class (or overall) limit the manifest will record.
        name: What a reader calls the data (its folder, list or generated source), recorded
            beside the manifest (``store.data_names.add``); None for an external source, whose
            manifest names itself.
    """

    scan: Scan
    source: Source | None
    limit: int | None
    name: str | None = None

    @cached_property  # listed once however many checks read it
    def targets(self) -> TargetsSeen:
        """The split's targets as listed (the engine checks them against the task's kind)."""
        return targets_seen(self.scan.layout, self.scan.root, self.scan.target_type)

    def target_files(self) -> list[Path]:
        """The kept samples' target files (per-pixel layouts; ``limit`` applied), for a target
        kind's or a task's check."""
        root = self.scan.root
        return [root / e.target_name for e in kept_entries(self.scan, self.limit)
                if e.target_name]

    @property
    def samples(self) -> int:
        """How many samples the manifest will hold (the limit applied), counted on the listing."""
        return len(kept_entries(self.scan, self.limit))


def list_split(store, data: str | Path, split: str | None = None, limit: int | None = None,
               **layout_options: Any) -> Listing:
    """The first half of :func:`load_manifest`: list the split, hash and store nothing (a
    named source is still materialised). Same arguments and errors as it."""
    scan, source = _scan_data(store, data, split, limit, layout_options)
    return Listing(scan, source, limit, None if source is not None else data_name(data, split))


# folder names that say which split, not which data: the dataset is the folder above
SPLIT_FOLDERS = frozenset({"train", "training", "val", "valid", "validation", "test", "testing",
                           "eval", "dev"})


def data_name(data: str | Path, split: str | None = None) -> str:
    """What a reader calls a folder, list or generated source: ``pets`` for ``~/data/pets``
    read with ``--split test``, or for ``~/data/pets/test``; a list file's stem; a generated
    source's own name (``shapes``, ``digits``)."""
    parsed = parse_source(data) if isinstance(data, str) else None
    if parsed is not None:
        name, params = parsed
        return params if params and "=" not in params else name
    path = Path(data).expanduser()
    if path.suffix in (".csv", ".jsonl", ".txt"):
        return path.stem
    path = path.resolve()
    if split is None and path.name.lower() in SPLIT_FOLDERS and path.parent.name:
        return path.parent.name
    return path.name


def store_listing(store, listing: Listing, *, touch: bool = True,
                  write: bool = True) -> ManifestView:
    """The second half of :func:`load_manifest`: the listed split's manifest, stored.

    ``write=False`` (a dry run) stores nothing: a manifest never stored is built and named by
    the hash of its document, as storing it would name it.
    """
    scan, source, limit = listing.scan, listing.source, listing.limit
    name = listing.name if write else None
    entries = kept_entries(scan, limit)
    files = file_states(scan, entries)
    key = None if files is None else state_key(scan, limit, entries, files)
    alias = {"op": "manifest-state", "key": key} if key else None

    def build() -> dict[str, Any]:
        doc = build_document(store, scan, limit)
        if source is not None:
            doc["source"] = source.record
        return doc

    if alias is not None:
        known = store.alias(alias)
        if known is not None and store.has(known):
            # the same listing over unchanged files: the same manifest, read when first used
            if touch:
                store.touch([known])  # in use: gc's grace period must see it
            if name:
                store.data_names.add(known, name)
            return ManifestView(scan.root, known, read=lambda: _read_stored(store, known, build),
                                size=len(entries), files=files)
    doc = build()
    if not write:
        return ManifestView(scan.root, canonical.digest(canonical.dumps(doc)), doc, files=files)
    oid = store_document(store, doc)
    if alias is not None:
        store.set_alias(alias, oid)
    if name:
        store.data_names.add(oid, name)
    return ManifestView(scan.root, oid, doc, files=files)


def _scan_data(store, data: str | Path, split: str | None, limit: int | None,
               layout_options: dict[str, Any]) -> tuple[Scan, Source | None]:
    """The listing of a data argument, and the external source it came from (if any)."""
    options = {k: v for k, v in layout_options.items() if v is not None}
    _check_option_names(options)
    check_limit(limit)
    if split is not None and (
        not isinstance(split, str) or not split or "/" in split or split in (".", "..")
    ):
        raise UsageError(f"bad split name {split!r}", hint="a split is one folder name, e.g. val")
    source_options = {k: options.pop(k) for k in SOURCE_OPTIONS if k in options}
    root, source = _resolve_data(store, data, split, source_options)
    if source is not None:  # a sample list in the store, in the source's class order
        if options:
            raise UsageError(f"{data} takes no {', '.join(sorted(options))} option",
                             hint="layout options describe folders and lists")
        options = {"layout": "list"}
        if source.classes is not None:
            options["classes"] = source.classes
    layout = options.pop("layout", None) or _detect(root, split, options)
    if layout not in LAYOUTS:
        raise UsageError(f"unknown layout {layout!r}", hint=f"use one of: {', '.join(LAYOUTS)}")
    if options.get("target") == "images" and layout not in ("dense", "nyu", "taskonomy"):
        del options["target"]  # "the images alone" (pixel-derived targets): no target to skip
    refused = sorted(set(options) - set(_APPLIES[layout]))
    if refused:
        raise UsageError(
            f"the {layout} layout takes no {', '.join(refused)} option",
            hint=f"it takes: {', '.join(_APPLIES[layout])}" if _APPLIES[layout]
            else "this layout takes none: drop it, or name the layout the data is in "
                 f"({field_ref('layout')})",
        )
    return _scan(layout, root, split, options), source


def _read_stored(store, oid: str, build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A manifest the alias named, its hash checked; damaged, it is rebuilt from the files.

    Raises:
        CorruptObject: the rebuilt document is not the one the alias named (the files changed
            without a trace in their stat), so the id already handed out cannot stand.
    """
    try:
        return store.read_json(oid)
    except VbstoreError:
        move_aside(store, oid)  # damaged: rebuilt from the file-state cache, published afresh
    doc = build()
    rebuilt = store_document(store, doc)
    if rebuilt != oid:
        raise CorruptObject(oid, str(store.files.path(oid)), rebuilt)
    return doc


def _stems_list(options: dict[str, Any], split: str | None) -> Any:
    """The stems list a split reads: ``train_stems`` for the train split, else ``stems``."""
    if split == "train" and "train_stems" in options:
        return options["train_stems"]
    return options.get("stems")


def _check_option_names(options: dict[str, Any]) -> None:
    for key in sorted(options):
        if key not in OPTIONS:
            import difflib  # a suggestion, on the error path only

            close = difflib.get_close_matches(key, OPTIONS, n=1)
            raise UsageError(
                f"no layout option {key!r} (valid: {', '.join(OPTIONS)})",
                hint=f"did you mean {close[0]!r}?" if close else _LAYOUT_HELP,
            )


def _resolve_data(store, data: str | Path, split: str | None,
                  source_options: dict[str, Any]) -> tuple[Path, Source | None]:
    """The folder or list file to scan, and the external source it was read from, if any."""
    parsed = parse_source(data) if isinstance(data, str) else None
    external = parsed is not None and is_source_kind(parsed[0])
    if external or any(v not in (None, False) for v in source_options.values()):
        check_source_options(parsed[0] if parsed and external else None, source_options)
    if parsed is not None:
        if external:
            source = open_source(store, *parsed, split, source_options)
            return source.list_path.resolve(), source
        return materialise(store, *parsed).resolve(), None
    path = Path(data).expanduser()
    if not path.exists():
        raise UsageError(
            f"no such file or folder: {data}",
            hint=f"give a folder, a .csv/.jsonl list, {', '.join(SOURCES)} (generated ones take "
            "parameters, e.g. scenes:per_split=8,size=64), hf:NAME, torchvision:NAME or wds:PATH",
        )
    return path.resolve(), None


def local_folder(store, data: str | Path) -> Path | None:
    """The local folder ``data`` is read from, when it is one (a path or a generated or
    packaged dataset); None for a sample list file or a source read from elsewhere."""
    parsed = parse_source(data) if isinstance(data, str) else None
    if parsed is not None and is_source_kind(parsed[0]):
        return None
    root, _ = _resolve_data(store, data, None, {})
    return root if root.is_dir() else None


def _detect(root: Path, split: str | None, options: dict[str, Any]) -> str:
    """The layout ``root`` is in, or a clear error when it matches none or needs a split."""
    if triplet_csv(root) is not None:  # its splits are a column, not folders
        return "triplets"
    if root.is_file() and pairs_csv(root, None) is not None:
        return "pairs"
    if root.is_file():
        from ._lists import LIST_SUFFIXES

        if root.suffix.lower() in LIST_SUFFIXES:
            return "list"
        raise UsageError(
            f"unknown layout: {root} is a file but not a .csv or .jsonl sample list",
            hint=f"a stems list goes with {field_ref('stems', 'FILE')} and the dataset folder "
                 "as DATA",
        )
    if "stems" in options or "train_stems" in options:
        return "stems"
    if is_spair(root):  # its splits are folders of pair files, not of images
        return "spair"
    if (root / "Annotations").is_dir() and (root / "ImageSets" / "Main").is_dir():
        return "voc"
    if any((root / "annotations").glob("instances_*.json")):
        return "coco"
    if is_taskonomy(root):  # its splits are buildings in a CSV, not folders
        return "taskonomy"
    if is_navi(root):  # its splits are a field of each image's annotation, not folders
        return "navi"
    base = root / split if split is not None else root
    if split is not None and not base.is_dir():
        found = subdirs(root)
        raise UsageError(
            f"no split {split!r} in {root}",
            hint=f"splits found: {', '.join(found)}" if found else f"omit {field_ref('split')}",
        )
    if (base / "images").is_dir():
        return "dense"
    if (base / "rgb").is_dir() and looks_paired(base, "rgb"):
        return "nyu"
    if pairs_csv(root, split) is not None:
        return "pairs"
    folders = subdirs(base)
    if not folders and loose_images(base):
        return "images"
    if split is None and folders and not any(loose_images(base / f) for f in folders):
        nested = [f for f in folders if (base / f / "images").is_dir() or subdirs(base / f)]
        if nested:
            raise UsageError(
                f"{root} has splits ({', '.join(folders)})", hint="choose one with "
                                                                  f"{field_ref('split')}"
            )
    if folders:
        return "image_folder"
    raise BadInput(
        "folders in no known layout",
        [(str(base), "no class folders, no images/ folder, no sample list")],
        hint=_LAYOUT_HELP,
    )


def _classes(value: str | Path | Sequence[str]) -> list[str]:
    if isinstance(value, (str, Path)):
        path = Path(value)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise UsageError(f"cannot read the class list {path}: {exc.strerror}") from None
        return [line.strip() for line in lines if line.strip()]
    return [str(c) for c in value]


def _with_boxes(scan: Scan, options: dict[str, Any], default: Sequence[str] | Path) -> Scan:
    """A scan of box annotations: its class list (``--classes``, else ``default``: a list, or a
    classes.txt file beside the splits) and the check of every annotation file."""
    if "classes" in options:
        classes = _classes(options["classes"])
    elif isinstance(default, Path):
        if not default.is_file():
            raise UsageError(f"box annotations need a class list: no {default}",
                             hint=f"pass {field_ref('classes', 'FILE')} (one class name per line)")
        classes = _classes(default)
    else:
        classes = list(default)
    if not classes or len(set(classes)) != len(classes):
        raise UsageError(f"a class list must name distinct classes, got {classes[:5]}",
                         hint="one class name per line, each once")
    scan.classes, scan.target_type = classes, "boxes"
    from ._boxes import check_box_files

    scan.check_targets = check_box_files(classes)
    return scan


def _scan(layout: str, root: Path, split: str | None, options: dict[str, Any]) -> Scan:
    if layout == "triplets":
        return scan_triplets(root, split, options.get("min_votes", MIN_VOTES))
    if layout == "pairs":
        if pairs_csv(root, split) is None and is_navi(root):  # relative_pose reads pairs.csv
            raise UsageError(f"no pairs.csv in {root}: it is laid out as NAVI",
                             hint=f"read it with {field_ref('layout', 'navi')} (layout='navi')")
        return scan_pairs(root, split)
    if layout == "spair":
        return scan_spair(root, split)
    if layout == "navi":
        if not root.is_dir():
            raise UsageError(f"the navi layout reads a folder, not the file {root}")
        given = {k: v for k, v in options.items() if k in DRAW_OPTIONS}
        return scan_navi(root, split, check_draw(given) if given else None)
    if layout == "images":
        if not root.is_dir():
            raise UsageError(f"the images layout reads a folder, not the file {root}")
        return scan_images(root, split)
    if layout == "list":
        if not root.is_file():
            raise UsageError(f"the list layout reads a .csv or .jsonl file, not the folder {root}")
        from ._lists import scan_list

        classes = _classes(options["classes"]) if "classes" in options else None
        return scan_list(root, split, classes, options.get("target_type"))
    if not root.is_dir():
        raise UsageError(f"the {layout} layout reads a folder, not the file {root}")
    if layout == "image_folder":
        return scan_image_folder(root, split)
    if layout == "voc":
        listed = _stems_list(options, split)
        scan = scan_voc(root, split, root / listed if listed is not None else None)
        from ._boxes import VOC_CLASSES

        return _with_boxes(scan, options, VOC_CLASSES)
    if layout == "coco":
        scan = scan_coco(root, split)
        if "classes" in options:
            return _with_boxes(scan, options, [])
        target = root / scan.entries[0].target_name  # type: ignore[operator]
        try:
            data = target.read_bytes()
        except OSError as exc:
            raise BadInput("unreadable box annotations",
                           [(str(target), exc.strerror or str(exc))]) from None
        from ._boxes import coco_classes

        return _with_boxes(scan, options, coco_classes(data, target))
    if layout == "taskonomy":
        splits = options.get("splits")
        return scan_taskonomy(root, split, options.get("target"), options.get("target_type"),
                              root / splits if splits is not None else None)
    if layout in ("dense", "nyu"):
        base = root / split if split is not None else root
        if not base.is_dir():
            raise UsageError(
                f"no split {split!r} in {root}", hint=f"splits found: {', '.join(subdirs(root))}"
            )
        scan = scan_dense(base, split, options.get("target"), options.get("target_type"),
                          image_dir="images" if layout == "dense" else "rgb", layout=layout)
        from ._boxes import BOX_SUFFIXES

        boxes = [e.target_name for e in scan.entries
                 if e.target_name and os.path.splitext(e.target_name)[1].lower() in BOX_SUFFIXES]
        if boxes:
            listed = base.parent / "classes.txt" if split is not None else base / "classes.txt"
            return _with_boxes(scan, options, listed)
        if "classes" in options:
            raise UsageError(f"the dense layout takes {field_ref('classes')} only for box "
                             "annotations",
                             hint="classes name the boxes of a .json/.xml target folder")
        return scan
    stems = _stems_list(options, split)
    if stems is None:
        raise UsageError(
            "the stems layout needs a stems list",
            hint=f"pass {field_ref('stems', 'FILE')} (and {field_ref('train_stems', 'FILE')} "
                 "for the train split)",
        )
    paths = {key: root / options.get(key, default) for key, default in _VOC_DIRS.items()}
    return scan_stems(
        root,
        split,
        root / stems,
        paths["image_dir"],
        paths["target_dir"],
        options.get("target_type"),
    )
