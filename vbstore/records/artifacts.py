"""Records of the artifacts a result is computed from: weights, backbone, manifest, featureset.

Each is a frozen dataclass that round-trips its document (schemas/<kind>.schema.json) exactly:
``Record.from_dict(d).to_dict() == d``, unknown fields and explicit nulls included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ._base import Record


@dataclass(frozen=True)
class WeightsRecord(Record):
    """The identity of a set of backbone weights (schemas/weights.schema.json).

    Attributes:
        tensor_hash: The canonical tensor identity (docs/formats.md, "Tensor identity").
        origin: ``pretrained``, ``fixed``, ``checkpoint`` or ``random``.
        upstream, revision: Where pretrained or fixed weights come from, pinned.
        path: Always null today (a file's name is not identity).
        seed: The init seed of random weights.
        tensors: The id of the stored tensors, when they are kept.
    """

    kind = "weights"

    tensor_hash: str
    origin: str
    upstream: str | None = None
    revision: str | None = None
    path: str | None = None
    seed: int | None = None
    tensors: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    # the fields a weights document written by vbstore always carries, null when unset: the
    # document is what the weights id hashes, so they stay written as null
    NULLED: ClassVar[tuple[str, ...]] = ("upstream", "revision", "path", "seed")

    @classmethod
    def identify(cls, tensor_hash: str, origin: str, *, upstream: str | None = None,
                 revision: str | None = None, seed: int | None = None) -> WeightsRecord:
        """The record of newly hashed weights, as its document is written (``upstream``,
        ``revision``, ``path`` and ``seed`` as explicit nulls when unset, as vbstore has always
        written them, so every weights id stays what it was)."""
        given = {"upstream": upstream, "revision": revision, "path": None, "seed": seed}
        return cls(tensor_hash, origin, upstream=upstream, revision=revision, seed=seed,
                   extra={k: None for k in cls.NULLED if given[k] is None})


@dataclass(frozen=True)
class BackboneRecord(Record):
    """A backbone: architecture, weights and preprocessing (schemas/backbone.schema.json).

    Attributes:
        source, architecture: ``torchvision``/``timm``/``open_clip``/... and the model name.
        weights: The id of its :class:`WeightsRecord`.
        preprocessing: ``input_size``, ``mean``, ``std``, ``interpolation``, crop...
        geometry: Patch size, cls token, embed dim, available layers.
    """

    kind = "backbone"

    source: str
    architecture: str
    weights: str
    preprocessing: dict[str, Any]
    geometry: dict[str, Any]
    revision: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """``source:architecture``."""
        return f"{self.source}:{self.architecture}"


@dataclass(frozen=True)
class ManifestRecord(Record):
    """One split of a dataset (schemas/manifest.schema.json): sorted samples with hashes.

    Attributes:
        layout: How the files were laid out (``image_folder``, ``dense``, ``list``...).
        samples: One dict per sample: ``name``, ``image`` and its targets.
        split, classes, target_type, limit, digest: As read.
        triplets, pairs, keypoint_pairs: The rows of the layouts that carry them.
    """

    kind = "manifest"

    layout: str
    samples: list[dict[str, Any]]
    split: str | None = None
    classes: list[str] | None = None
    target_type: str | None = None
    limit: int | None = None
    triplets: list[list[int]] | None = None
    pairs: list[list[float]] | None = None
    keypoint_pairs: list[list[Any]] | None = None
    digest: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def class_names(self) -> list[str]:
        return list(self.classes or [])

    def __len__(self) -> int:
        return len(self.samples)


@dataclass(frozen=True)
class FeaturesetRecord(Record):
    """The features of one manifest under one extractor (schemas/featureset.schema.json).

    Attributes:
        extractor, extractor_key: The extractor settings and their key.
        manifest, backbone: The ids it was extracted from.
        packs: The packs holding its rows; ``rows[i]`` is ``[pack index, row]`` of sample i.
    """

    kind = "featureset"

    extractor: dict[str, Any]
    extractor_key: str
    manifest: str
    backbone: str
    packs: list[str]
    rows: list[list[int]]
    extra: dict[str, Any] = field(default_factory=dict)
