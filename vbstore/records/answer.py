"""An answer checked against its question: what a derivation's output declares vs its spec.

A derivation record maps a key (the hash of a spec) to an output id, and the output's bytes are
verified against that id; but a row pointed at another output, or a remote's record whose bytes
are whole but describe another computation, would still be served as the answer. Every output
the engine writes declares the question it answers (a result its task, parameters, seeds,
extractor and inputs; a featureset its backbone, manifest and extractor, row by row; a head its
task, parameters, seed and features), so before an answer is served or recorded, locally, from a
ref or from a remote, the gate (:func:`vbstore.records.gate.check_answer`) compares the two
with the check its op declares there (:data:`vbstore.records.gate.QUESTIONS`).

Only fields the spec names are compared: a spec shaped otherwise than the engine's is one no
request of the engine hashes to, so it is never asked for.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .. import canonical
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
    for role, split in (("eval_manifest", "eval"), ("train_manifest", "train"),
                        ("val_manifest", "val")):
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
    if "val_features" in spec["inputs"]:  # --val-split: searched on features of the same kind
        val = reader.json(spec["inputs"]["val_features"])
        _differ(out, "val extractor key", compat.get("extractor_key"), val.get("extractor_key"))
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


def _tensors_header(reader: StoreReader, output: str) -> tuple[dict[str, Any], dict[str, str]]:
    header = read_safetensors_header(reader.path(output))[0]
    return header, header.get("__metadata__") or {}


def _prefix(spec: Mapping[str, Any], output: str, reader: StoreReader) -> list[str]:
    # a prefix names its backbone, cut, manifest and, row by row, the image each row holds
    header, meta = _tensors_header(reader, output)
    inputs = spec["inputs"]
    out: list[str] = []
    _differ(out, "kind", meta.get("vbstore.kind"), "prefix")
    _differ(out, "backbone", meta.get("backbone"), inputs.get("backbone"))
    _differ(out, "manifest", meta.get("manifest"), inputs.get("manifest"))
    _differ(out, "blocks", meta.get("blocks"), str(spec["params"].get("blocks")))
    if out:
        return out
    images = [s["image"] for s in reader.json(inputs["manifest"])["samples"]]
    return prefix_rows_differences(header, images)


def prefix_rows_differences(header: Mapping[str, Any], images: list[str] | None) -> list[str]:
    """Where a prefix's rows (its header's ``images``, one per activation row) are not the
    manifest's ``images`` in order: another split's prefix, or rows rolled or shuffled
    (``images`` None: only whether it names one image per row)."""
    meta = header.get("__metadata__") or {}
    rows = json.loads(meta.get("images") or "null")
    shape = (header.get("activations") or {}).get("shape") or [None]
    if not isinstance(rows, list) or not all(isinstance(r, str) for r in rows):
        return ["it names no image per row"]
    if shape[0] != len(rows):
        return [f"it has {shape[0]} activation rows for {len(rows)} image ids"]
    if images is None:
        return []
    if len(rows) != len(images):
        return [f"it has {len(rows)} rows for {len(images)} images"]
    for position, (row, image) in enumerate(zip(rows, images, strict=True)):
        if row != image:
            return [f"row {position} holds another image than the manifest's"]
    return []


def finetuned_differences(compat: Mapping[str, Any], reader: StoreReader) -> list[str]:
    """Where a fine-tuned head's record and its fine-tuned weights name other parents.

    The fine-tuned weights name the backbone and weights record they were trained from, in
    their own bytes (so in their id): a head whose record was edited to name another backbone
    is refused, its blocks having been trained on the parent its weights name. Empty for a
    head trained without fine-tuning, or whose fine-tuned weights are not here.
    """
    tuned = compat.get("finetune")
    if not isinstance(tuned, dict) or not reader.present(str(tuned.get("weights"))):
        return []
    _, meta = _tensors_header(reader, str(tuned["weights"]))
    out: list[str] = []
    _differ(out, "fine-tuned weights' kind", meta.get("vbstore.kind"), "finetuned")
    _differ(out, "fine-tuned weights' parent backbone", meta.get("backbone"),
            compat.get("backbone"))
    _differ(out, "fine-tuned blocks", meta.get("blocks"), str(tuned.get("blocks")))
    weights = meta.get("weights")
    if not out and isinstance(weights, str) and reader.present(weights):
        _differ(out, "fine-tuned weights' parent weights",
                reader.json(weights).get("tensor_hash"), compat.get("weights"))
    return out


def _finetune(spec: Mapping[str, Any], output: str, reader: StoreReader) -> list[str]:
    # a head trained with the last blocks: its record, and the parent its weights name
    params, inputs = spec["params"], spec["inputs"]
    compat = json.loads(_tensors_header(reader, output)[1].get("vbstore.compat") or "{}")
    tuned = compat.get("finetune") if isinstance(compat.get("finetune"), dict) else {}
    out: list[str] = []
    _differ(out, "backbone", compat.get("backbone"), inputs.get("backbone"))
    _differ(out, "train data", compat.get("train_manifest"), inputs.get("train_manifest"))
    for field, key in (("task", "task"), ("task_op_version", "task_op_version"),
                       ("params", "task_params"), ("seed", "seed")):
        _differ(out, field, compat.get(field), params.get(key))
    for field in ("blocks", "backbone_lr"):
        _differ(out, field, tuned.get(field), params.get(field))
    if out:
        return out
    if not reader.present(str(tuned.get("weights"))):
        return ["its fine-tuned weights are not here"]
    return finetuned_differences(compat, reader)


def _text(spec: Mapping[str, Any], output: str, reader: StoreReader) -> list[str]:
    # text-tower outputs name their model and the digest of their texts (engine._textcache)
    header, meta = _tensors_header(reader, output)
    if "texts" not in meta:
        return ["it declares no prompt set or model (stored before they were recorded)"]
    params = spec["params"]
    out: list[str] = []
    _differ(out, "kind", meta.get("vbstore.kind"), "tensors")
    _differ(out, "backbone", meta.get("backbone"), spec["inputs"].get("backbone"))
    _differ(out, "texts", meta.get("texts"), params.get("texts"))
    _differ(out, "count", meta.get("count"), str(params.get("count")))
    _differ(out, "rows", ((header.get("embeddings") or {}).get("shape") or [None])[0],
            params.get("count"))
    return out
