"""An answer checked against its question: what a derivation's output declares vs its spec.

A derivation record maps a key (the hash of a spec) to an output id, and the output's bytes are
verified against that id; but a row pointed at another output, or a remote's record whose bytes
are whole but describe another computation, would still be served as the answer. Every output
the engine writes declares the question it answers (a result its task, parameters, seeds,
extractor and inputs; a featureset its backbone, manifest and extractor, row by row; a head its
task, parameters, seed and features), so before an answer is served or recorded, locally, from a
ref or from a remote, :func:`check_answer` compares the two.

Only fields the spec names are compared: a spec shaped otherwise than the engine's is one no
request of the engine hashes to, so it is never asked for.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .. import canonical
from ..errors import MisfiledAnswer, VbstoreError
from ..store import pack_index, read_safetensors_header


class StoreReader:
    """Reads the documents a check needs from a store (``known``: ids already read)."""

    def __init__(self, store, known: Mapping[str, dict[str, Any]] | None = None) -> None:
        self.store = store
        self.known = dict(known or {})

    def json(self, oid: str) -> dict[str, Any]:
        if oid not in self.known:
            self.known[oid] = self.store.read_json(oid)
        return self.known[oid]

    def path(self, oid: str) -> Path:
        return self.store.path(oid)

    def present(self, oid: str) -> bool:
        return bool(self.store.has(oid))


class StagedReader(StoreReader):
    """Reads blobs not yet in the store (a transfer's temp files) before the store's own."""

    def __init__(self, store, staged: Mapping[str, Path]) -> None:
        super().__init__(store)
        self.staged = dict(staged)

    def json(self, oid: str) -> dict[str, Any]:
        if oid in self.staged and oid not in self.known:
            self.known[oid] = json.loads(self.staged[oid].read_bytes())
        return super().json(oid)

    def path(self, oid: str) -> Path:
        return self.staged[oid] if oid in self.staged else super().path(oid)

    def present(self, oid: str) -> bool:
        return oid in self.staged or super().present(oid)


def check_answer(spec: Mapping[str, Any], output: str, reader: StoreReader,
                 source: str | Callable[[], str]) -> None:
    """Refuse ``output`` as the answer of ``spec`` when it declares another question.

    ``source`` names where the answer came from (a callable: asked only for the error).

    Raises:
        MisfiledAnswer: naming ``source`` and what differs.
    """
    try:
        differences = answer_differences(spec, output, reader)
    except (VbstoreError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        differences = [f"it cannot be read as a {spec.get('op')} ({exc})"]
    if differences:
        raise MisfiledAnswer(output, source() if callable(source) else source, differences)


def answer_differences(spec: Mapping[str, Any], output: str, reader: StoreReader) -> list[str]:
    """What ``output`` declares that ``spec`` does not ask (empty: it answers it)."""
    check = _CHECKS.get(spec["op"])
    return check(spec, output, reader) if check is not None else []


def _differ(out: list[str], what: str, declared: Any, asked: Any) -> None:
    if declared != asked:
        out.append(f"it says {what} {_short(declared)}, the question {_short(asked)}")


def _short(value: Any) -> str:
    text = canonical.dumps(value).decode() if value is not None else "nothing"
    if isinstance(value, str) and len(value) == 64:
        text = value[:12]
    return text if len(text) <= 60 else text[:57] + "..."


def _result(spec: Mapping[str, Any], output: str, reader: StoreReader) -> list[str]:
    doc, params, inputs = reader.json(output), spec["params"], spec["inputs"]
    out: list[str] = []
    _differ(out, "kind", doc.get("kind"), "result")
    _differ(out, "op_version", doc.get("op_version"), spec["op_version"])
    for field, key in (("task", "task"), ("params", "task_params"), ("seeds", "seeds"),
                       ("extractor", "extractor")):
        if key in params:
            _differ(out, field, doc.get(field), params[key])
    for field in ("pooling_requested", "notes"):  # in the key only when the request named them
        if field in params:
            _differ(out, field, doc.get(field), params[field])
    declared = doc.get("inputs") or {}
    for role, oid in inputs.items():
        _differ(out, role, declared.get(role), oid)
    data = doc.get("data") or {}
    for role, split in (("eval_manifest", "eval"), ("train_manifest", "train")):
        if role in inputs or (split == "train" and "eval_manifest" in inputs):
            _differ(out, f"{split} data", (data.get(split) or {}).get("manifest"),
                    inputs.get(role))
    return out


def _featureset(spec: Mapping[str, Any], output: str, reader: StoreReader) -> list[str]:
    doc, inputs = reader.json(output), spec["inputs"]
    out: list[str] = []
    _differ(out, "kind", doc.get("kind"), "featureset")
    _differ(out, "backbone", doc.get("backbone"), inputs.get("backbone"))
    _differ(out, "manifest", doc.get("manifest"), inputs.get("manifest"))
    extractor = {**spec["params"], "backbone": inputs.get("backbone"), "op": "extract",
                 "op_version": spec["op_version"]}
    _differ(out, "extractor", doc.get("extractor"), extractor)
    if out:
        return out
    _differ(out, "extractor key", doc.get("extractor_key"), canonical.key_of(extractor))
    # rows are checked where their packs are here (an evicted pack is extracted again, and a
    # served featureset has all of them: see packs_present)
    if not out and all(reader.present(p) for p in doc.get("packs") or []):
        images = [s["image"] for s in reader.json(inputs["manifest"])["samples"]]
        out += rows_differences(doc, images, lambda pack: pack_index(reader.path(pack)))
    return out


def rows_differences(doc: Mapping[str, Any], images: list[str],
                     index: Callable[[str], tuple[str, list[str]] | None]) -> list[str]:
    """Where a featureset's rows hold other images than its manifest's, row by row, as each
    pack's header says (``index(pack)``: :func:`vbstore.store.pack_index`)."""
    rows, packs = doc.get("rows") or [], doc.get("packs") or []
    if len(rows) != len(images):
        return [f"it has {len(rows)} rows for {len(images)} images"]
    headers = [index(pack) for pack in packs]
    for position, (image, (pack, row)) in enumerate(zip(images, rows, strict=True)):
        header = headers[pack] if 0 <= pack < len(headers) else None
        if header is None or header[0] != doc.get("extractor_key"):
            return [f"row {position}: pack {pack} was not made by its extractor"]
        if not 0 <= row < len(header[1]) or header[1][row] != image:
            return [f"row {position} holds another image's features than the manifest's"]
    return []


def _head(spec: Mapping[str, Any], output: str, reader: StoreReader) -> list[str]:
    params = spec["params"]
    out: list[str] = []
    metadata = read_safetensors_header(reader.path(output))[0].get("__metadata__") or {}
    compat = json.loads(metadata.get("vbstore.compat") or "{}")
    _differ(out, "task op_version", compat.get("task_op_version"), spec["op_version"])
    for field, key in (("task", "task"), ("params", "task_params"), ("seed", "seed")):
        if key in params:
            _differ(out, field, compat.get(field), params[key])
    if "features" in spec["inputs"]:
        features = reader.json(spec["inputs"]["features"])
        _differ(out, "extractor key", compat.get("extractor_key"), features.get("extractor_key"))
        _differ(out, "backbone", compat.get("backbone"), features.get("backbone"))
        _differ(out, "train data", compat.get("train_manifest"), features.get("manifest"))
    return out


def _backbone(spec: Mapping[str, Any], output: str, reader: StoreReader) -> list[str]:
    doc, params = reader.json(output), spec["params"]
    out: list[str] = []
    _differ(out, "kind", doc.get("kind"), "backbone")
    if "source" in params:
        _differ(out, "source", doc.get("source"), params["source"])
    # the library adapters name the architecture the spec asked for (timm adds the weights
    # tag: vit_small_patch14_dinov2.lvd142m); a plugin names its own, so only its source counts
    arch, declared = params.get("arch"), str(doc.get("architecture"))
    if params.get("source") in _LIBRARIES and arch is not None \
            and declared != arch and not declared.startswith(f"{arch}."):
        _differ(out, "architecture", declared, arch)
    return out


_LIBRARIES = ("torchvision", "timm", "open_clip", "dinov2")


def _views(spec: Mapping[str, Any], output: str, reader: StoreReader) -> list[str]:
    doc = reader.json(output)
    out: list[str] = []
    _differ(out, "kind", doc.get("kind"), "manifest")
    if "manifest" in spec["inputs"]:
        source = reader.json(spec["inputs"]["manifest"])
        _differ(out, "samples", len(doc.get("samples") or []), len(source.get("samples") or []))
    return out


def _captions(spec: Mapping[str, Any], output: str, reader: StoreReader) -> list[str]:
    # a canonical JSON blob (vbstore.engine._captions) naming what wrote it, from what
    doc = json.loads(reader.path(output).read_bytes())
    out: list[str] = []
    for role in ("backbone", "manifest"):
        _differ(out, role, doc.get(role), spec["inputs"][role])
    _differ(out, "decoding", doc.get("decoding"), spec["params"]["decoding"])
    if not isinstance(doc.get("captions"), list):
        out.append("it holds no caption list")
    return out


_CHECKS: dict[str, Callable[[Mapping[str, Any], str, StoreReader], list[str]]] = {
    "result": _result, "featureset": _featureset, "head": _head, "backbone": _backbone,
    "warp_views": _views, "captions": _captions,
}
