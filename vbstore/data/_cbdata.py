"""``cb:NAME[@LANG]``: a dataset CLIP_benchmark names, read through its own builder.

The installed ``clip_benchmark`` (``pip install 'vbstore[clip-benchmark]'``) is asked for the
dataset (``build_dataset``), its class names and its zero-shot templates in ``LANG`` (its
``--language``; ``en`` by default), with ``--dataset-root`` a folder or a template with
``{dataset}`` / ``{dataset_cleaned}`` as its ``--dataset_root`` is. The samples become an
ordinary sample list in the store (pixels as vbstore's deterministic PNG), so the manifest is
content-addressed like any other and the same images read from a folder share their features.
The class names are the manifest's classes; the templates go into its ``source`` record, where
the zero-shot tasks find them (``--templates dataset``). Caption and compositionality sets
(``mscoco_captions``, ``flickr30k``, ``sugar_crepe/...``, ``winoground``...) become lists with a
``captions`` column instead (:mod:`._cbtext`).

Nothing is downloaded unless ``--download`` is given: offline, a missing dataset root or files
the builder cannot find stop the run with one line naming the folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._net import unreachable_reason
from ..errors import DataUnavailable, MissingDependency, UsageError, field_ref
from ._cbtext import builder_task, check_on_disk, is_text_set, text_records
from ._hf import _offline
from ._sources import Record, Source, file_states, folder_key, write_list

_WDS = "wds/"
TEMPLATE_FIELDS = ("dataset", "dataset_cleaned")
_CB_EXTRA = ("pip install 'vbstore[clip-benchmark]' (CLIP_benchmark 1.6.2, pycocoevalcap and "
             "webdataset)")


def _builder() -> Any:
    try:
        # heavy (torch, torchvision, CLIP_benchmark's dataset modules): only for cb: data
        from clip_benchmark.datasets import builder
    except ImportError as exc:
        raise UsageError(f"cb: data is read through CLIP_benchmark, which is not importable "
                         f"({exc.name or exc})", hint=_CB_EXTRA) from None
    return builder


def parse_name(rest: str) -> tuple[str, str]:
    """``(dataset, language)`` of ``NAME[@LANG]``."""
    name, _, language = rest.partition("@")
    return name, language or "en"


def template_fields(name: str) -> dict[str, str]:
    """What CLIP_benchmark fills a ``--dataset_root`` template with: the dataset's name after a
    ``wds/`` prefix (``cb:wds/vtab/cifar10`` -> ``vtab/cifar10``) and that name with ``/`` read
    as ``-`` (``vtab-cifar10``, the Hub's ``clip-benchmark/wds_vtab-cifar10``)."""
    short = name.removeprefix(_WDS)
    return {"dataset": short, "dataset_cleaned": short.replace("/", "-")}


def check_template(template: str) -> None:
    """Refuse a ``--dataset-root`` whose ``{...}`` fields are not exactly CLIP_benchmark's
    (``{dataset}``, ``{dataset_cleaned}``): no other name, attribute, index, conversion or
    format, which ``str.format`` would otherwise evaluate.

    Raises:
        UsageError: another field, or braces that do not pair.
    """
    try:
        fields = [(f, c, spec) for _, f, spec, c in string.Formatter().parse(template)
                  if f is not None]
    except ValueError as exc:
        raise UsageError(f"{field_ref('dataset_root', repr(template))} is not a template: {exc}",
                         hint="double a literal brace ({{ }}); the fields are {dataset} and "
                              "{dataset_cleaned}") from None
    for field, conversion, spec in fields:
        if field not in TEMPLATE_FIELDS or conversion or spec:
            shown = "{" + field + (f"!{conversion}" if conversion else "") + \
                (f":{spec}" if spec else "") + "}"
            raise UsageError(f"{field_ref('dataset_root', repr(template))} names {shown}: only "
                             "{dataset} and {dataset_cleaned} are filled in",
                             hint="e.g. 'https://huggingface.co/datasets/clip-benchmark/"
                                  "wds_{dataset_cleaned}/tree/main' or 'data/{dataset}'")


def is_url(root: str) -> bool:
    """Whether a dataset root is a URL (``https://...``), which stays text, never a path."""
    return "://" in root


def dataset_root(template: str, name: str) -> str:
    """CLIP_benchmark's ``--dataset_root`` for ``name``: a folder, a URL, or a template of
    either.

    Raises:
        UsageError: a template field CLIP_benchmark does not fill (:func:`check_template`).
    """
    check_template(template)
    filled = template.format(**template_fields(name))
    return filled if is_url(filled) else str(Path(filled).expanduser())


def _reachable(name: str, url: str, download: bool) -> None:
    """Refuse, in one line naming the URL, a URL root that would be read without ``download``,
    a dataset whose builder reads no URL, a missing webdataset, or a host that does not answer
    now (one probe of a second or two, never the 50 s of a client's retries).

    Raises:
        UsageError: not ``wds/``, or no ``download``.
        DataUnavailable: offline, or the host does not answer.
        MissingDependency: webdataset is not installed.
    """
    if not name.startswith(_WDS):
        raise UsageError(f"cb:{name} is not read from a URL ({url}): CLIP_benchmark reads URLs "
                         "only for its webdataset copies",
                         hint=f"ask for cb:{_WDS}{name}, or point {field_ref('dataset_root')} "
                              "at a folder")
    if not download:
        raise UsageError(f"cb:{name} would be read from {url}, and nothing is downloaded "
                         f"without {field_ref('download')}", hint=f"add {field_ref('download')}")
    reason = unreachable_reason(url)
    if reason is not None:
        raise DataUnavailable(f"cb:{name} reads {url}, which cannot be reached: {reason}",
                              hint="check the network (or unset the offline variable), or copy "
                                   "the shards to a folder and point "
                                   f"{field_ref('dataset_root')} at it")
    try:
        import webdataset  # noqa: F401  CLIP_benchmark's wds reader; named here if missing
    except ImportError:
        raise MissingDependency("webdataset", "clip-benchmark") from None


def open_cb(store, rest: str, split: str | None, options: dict[str, Any]) -> Source:
    """Read one split of ``cb:NAME[@LANG]`` through CLIP_benchmark's ``build_dataset``.

    Raises:
        UsageError: CLIP_benchmark missing, no dataset root, a dataset or split it refuses, or
            its files missing (and no ``download``).
    """
    name, language = parse_name(rest)
    if options.get("dataset_root") is None:
        raise UsageError(f"cb:{name} reads its files from a dataset root",
                         hint=f"pass {field_ref('dataset_root', 'DIR')} or a template such as "
                              f"'data/{{dataset}}' "
                              f"(add {field_ref('download')} to fetch them there)")
    where = dataset_root(str(options["dataset_root"]), name)
    download = bool(options.get("download"))
    url = is_url(where)
    root = Path(where)  # a URL is handed to the builder as text, never as this path
    if url:
        _reachable(name, where, download)
    elif not download and not root.is_dir():  # some builders would fetch a missing root anyway
        raise UsageError(f"cb:{name} is not on disk: {root} does not exist",
                         hint=f"point {field_ref('dataset_root')} at it, or add "
                              f"{field_ref('download')} to fetch it there")
    text = is_text_set(name)
    # a caption set's webdataset copy (its dataset_type.txt says retrieval): a stream of
    # (image, captions), read into a list with a captions column as the folder copy is
    streamed_text = name.startswith(_WDS) and is_text_set(name.removeprefix(_WDS))
    builder = _builder()
    if text and not download:  # its builder would fetch a missing file, whatever download says
        check_on_disk(name, root, split or "test", language)
    hub: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    try:
        if name == "winoground":  # from the Hub through `datasets`: its cache at the root
            import datasets  # noqa: F401  heavy (pyarrow): only for this set; named if missing

            hub = _offline(not download)
    except ImportError as exc:
        raise UsageError(f"cb:{name} is read through the datasets package, which is not "
                         f"importable ({exc.name or exc})",
                         hint="pip install 'vbstore[hf]'") from None
    custom = _custom_files(options)
    try:
        with hub:
            dataset = builder.build_dataset(dataset_name=name, root=where, transform=None,
                                            split=split or "test", download=download,
                                            language=language,
                                            # a caption set's copy as its own: no class names
                                            task=builder_task(name.removeprefix(_WDS)
                                                              if streamed_text else name),
                                            **{k: v for k, v in custom.items() if v})
    except (RuntimeError, FileNotFoundError, OSError) as exc:
        raise UsageError(f"cb:{name} ({split or 'test'}) is not complete in {where}: "
                         f"{str(exc).splitlines()[0][:200].rstrip('. ')}",
                         hint=f"point {field_ref('dataset_root')} at the folder that holds it, "
                              "or add "
                              f"{field_ref('download')}") from None
    except (AssertionError, ValueError, KeyError, TypeError) as exc:
        # TypeError: no templates file in that language (CLIP_benchmark indexes None)
        raise UsageError(f"CLIP_benchmark refuses cb:{name} split {split or 'test'}: "
                         f"{str(exc)[:200] or type(exc).__name__}",
                         hint="see CLIP_benchmark's dataset list; splits are usually train, "
                              "test") from None
    if text or streamed_text:
        key = folder_key("cb", 1, name, language, split, _state(where))
        rows = (_streamed_captions(name, dataset) if streamed_text
                else _checked(text_records(dataset), root))
        list_path = write_list(store, f"cb-v1-{key}", rows)
        return Source(list_path, None, {"kind": "cb", "name": name, "language": language})
    classes = [str(c) for c in getattr(dataset, "classes", None) or []] or None
    named = classes
    if classes is not None and len(set(classes)) < len(classes):
        classes = _distinct(classes)  # imagenet1k names two classes "missile" (jp: nine pairs)
    templates = getattr(dataset, "templates", None)
    class_prompts = None
    if isinstance(templates, dict):  # class-specific prompts (CuPL): one list per class
        class_prompts = _class_prompts(name, templates, named or [])
    if not isinstance(templates, list):
        templates = None
    key = folder_key("cb", 1, name, language, split, _state(where),
                     *([_file_states(custom)] if any(custom.values()) else []))

    def records():
        from ._tvdata import _images  # numpy: only when the samples are written

        # a webdataset is a stream: no length, no index
        streamed = name.startswith(_WDS)
        width = 6 if streamed else max(6, len(str(len(dataset) - 1)))
        samples = _streamed(dataset) if streamed else _images(dataset)
        for index, (pixels, target) in enumerate(samples):
            label = classes[target] if classes is not None else str(target)
            yield Record(f"{index:0{width}d}", pixels, label)

    list_path = write_list(store, f"cb-v1-{key}", records())
    record: dict[str, Any] = {"kind": "cb", "name": name, "language": language}
    if templates:
        record["templates"] = [str(t) for t in templates]
    if named != classes:  # the prompts' names, CLIP_benchmark's verbatim
        record["classnames"] = named
    if class_prompts is not None:
        record["class_prompts"] = class_prompts
    for option, path in custom.items():  # what the classes and prompts came from
        if path:
            record[option] = _file_state(path)
    json.dumps(record)  # canonical JSON later: fail here on anything odd
    return Source(list_path, classes, record)


def _custom_files(options: dict[str, Any]) -> dict[str, str | None]:
    """CLIP_benchmark's per-dataset class-name and template files (its ``--custom_*_file``):
    a path here, or the name of one it ships (``cupl_prompts.json``), which it finds itself.

    Raises:
        UsageError: a JSON file that is not an object keyed by dataset name.
    """
    out: dict[str, str | None] = {}
    for option in ("custom_template_file", "custom_classname_file"):
        path = options.get(option)
        out[option] = str(path) if path else None
        if path and Path(path).is_file():
            try:
                loaded = json.loads(Path(path).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise UsageError(f"--{option.replace('_', '-')} {path} is not readable JSON: "
                                 f"{exc}", hint="CLIP_benchmark's format: a JSON object keyed "
                                 "by dataset name") from None
            if not isinstance(loaded, dict):
                raise UsageError(f"--{option.replace('_', '-')} {path} is not a JSON object",
                                 hint='keyed by dataset name, e.g. {"cifar10": [...]}')
    return out


def _file_state(path: str) -> str:
    """A custom file as its content (sha256), or a name CLIP_benchmark resolves itself."""
    file = Path(path)
    if file.is_file():
        return "sha256:" + hashlib.sha256(file.read_bytes()).hexdigest()
    return path


def _file_states(custom: dict[str, str | None]) -> list[tuple[str, str]]:
    return [(k, _file_state(v)) for k, v in sorted(custom.items()) if v]


def _class_prompts(name: str, prompts: dict[str, Any], classes: list[str]) -> list[list[str]]:
    """CuPL's class -> prompts, as one list per class in the data's class order.

    Raises:
        UsageError: a class with no prompts, or prompts that are not strings.
    """
    out = []
    for cls in classes:
        texts = prompts.get(cls)
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise UsageError(f"cb:{name}: the templates file gives class {cls!r} no list of "
                             "prompts", hint="class-specific prompts (CuPL) name every class")
        out.append([str(t) for t in texts])
    return out


def _state(where: str) -> Any:
    """What keys the sample list written from a root: the states of its files, or a URL as
    given (a branch such as ``tree/main`` is read once: pin a commit to follow a change)."""
    return where if is_url(where) else file_states(_files(Path(where)))


def _streamed(dataset: Any) -> Iterator[tuple[Any, int]]:
    """(uint8 pixel array, class index) of each sample of an iterable (webdataset) dataset."""
    import numpy as np  # only when the samples are written

    for image, target in dataset:
        mode = "L" if image.mode in ("1", "L", "I", "I;16", "F") else "RGB"
        yield np.asarray(image.convert(mode), dtype=np.uint8), int(target)


def _streamed_captions(name: str, dataset: Any) -> Iterator[Record]:
    """One record per sample of a caption webdataset (its image's pixels, its captions, one
    per line of its ``.txt`` as CLIP_benchmark splits them), numbered in stream order.

    Raises:
        UsageError: the shards are not a caption set (a class label where captions belong) or
            a sample has no caption.
    """
    import numpy as np  # only when the samples are written

    for index, (image, captions) in enumerate(dataset):
        if not isinstance(captions, list) or not captions:
            what = "no caption" if isinstance(captions, list) else type(captions).__name__
            raise UsageError(f"cb:{name} sample {index} has {what} where captions belong",
                             hint="its dataset_type.txt must say retrieval, and each sample "
                                  "needs a .txt member (one caption per line)")
        yield Record(f"{index:06d}", np.asarray(image.convert("RGB"), dtype=np.uint8),
                     [str(c) for c in captions], column="captions")


def _files(root: Path) -> list[Path]:
    """Every file under the root: their states key the sample list written from them."""
    return sorted(p for p in root.rglob("*") if p.is_file())


def _checked(records: Iterator[Record], root: Path) -> Iterator[Record]:
    """``records``, with an image file CLIP_benchmark's annotations name but the root lacks
    refused in one line."""
    try:
        yield from records
    except FileNotFoundError as exc:
        raise UsageError(f"an image the annotations name is not in {root}: "
                         f"{exc.filename or exc}",
                         hint="complete the image folder (or fix the annotation file)") from None


def _distinct(names: list[str]) -> list[str]:
    """``names`` with a repeated one told apart (``missile``, then ``missile (2)``): a manifest's
    class names label its samples, so each must be one class; the prompts keep the originals."""
    out: list[str] = []
    for name in names:
        label, k = name, 1
        while label in out:
            k += 1
            label = f"{name} ({k})"
        out.append(label)
    return out
