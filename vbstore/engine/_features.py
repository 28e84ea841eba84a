"""``get_features``: backbone + data + extractor settings → a stored featureset, computed once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..data import load_manifest
from ..features import OP_VERSION, ExtractorParams
from ..store import Store, derivation_spec
from ._backbone import BackboneRef, resolve_backbone
from ._cache import derive
from ._device import resolve_device


@dataclass
class FeatureResult:
    """What ``get_features`` returns."""

    id: str
    backbone: BackboneRef
    manifest: Any
    params: Any
    from_cache: bool
    stats: dict[str, Any]

    @property
    def features(self):
        from ..features import Features  # torch: Features reads packs as tensors

        return Features(self.backbone.store, self.id)

    @property
    def source(self) -> str:
        """``computed``, ``store`` or ``remote`` (``stats["remote"]`` names it)."""
        if not self.from_cache:
            return "computed"
        return "remote" if "remote" in self.stats else "store"

    def as_dict(self) -> dict[str, Any]:
        return {"featureset": self.id, "backbone": self.backbone.id, "manifest": self.manifest.id,
                "samples": len(self.manifest.doc["samples"]), "extractor": self.params.to_dict(),
                "from_cache": self.from_cache, "source": self.source, "stats": self.stats}


def featureset_spec(backbone_id: str, manifest_id: str, params) -> dict[str, Any]:
    return derivation_spec("featureset", OP_VERSION,
                           {"backbone": backbone_id, "manifest": manifest_id}, params.to_dict())


def packs_present(store, featureset_id: str) -> bool:
    """A featureset hit counts only with all its packs; using them refreshes them for gc."""
    packs = store.read_json(featureset_id)["packs"]
    store.touch(packs)
    return all(store.has(p) for p in packs)


def get_features(
    backbone: Any, data: Any, *, store=None, split: str | None = None, limit: int | None = None,
    layers: Sequence[int] = (-1,), pooling: str | None = None, mode: str = "pooled",
    precision: str = "fp32", dense_dtype: str = "float16", weights: str = "default",
    seed: int | None = None, input_size: int | None = None, use_projection: bool = False,
    batch_size: int = 32, workers: int = 2, device: str | None = None,
    progress: bool | Callable[..., Any] = True,
    data_options: dict[str, Any] | None = None, loader: str = "threads", executor: Any = None,
) -> FeatureResult:
    """Features of ``data`` under ``backbone``, computing only what the store lacks.

    ```python
    result = vbstore.get_features("test_vit", "path/to/images", split="val", weights="random")
    x = result.features.pooled()     # (N, C)
    ```

    ``executor=vbstore.features.RayExecutor(address="auto")`` extracts on a Ray cluster instead
    (the same featureset id); None extracts here.
    """
    store = store if store is not None else Store()
    ref = resolve_backbone(store, backbone, weights=weights, seed=seed, input_size=input_size,
                           use_projection=use_projection)
    manifest = load_manifest(store, data, split=split, limit=limit, **(data_options or {}))
    params = ExtractorParams(layers=tuple(layers), pooling=pooling or ref.default_pooling,
                             mode=mode, precision=precision, dense_dtype=dense_dtype,
                             input_size=ref.keyed_input_size(input_size))
    oid, computed, stats = derive_featureset(
        store, ref, manifest, params, device=device, progress=progress, batch_size=batch_size,
        workers=workers, loader=loader, executor=executor)
    return FeatureResult(oid, ref, manifest, params, not computed, stats)


def derive_featureset(store, ref: BackboneRef, manifest, params, *, device: str | None = None,
                      progress: bool | Callable[..., Any] = True, executor: Any = None,
                      **extract_options: Any) -> tuple[str, bool, dict[str, Any]]:
    """The featureset of ``manifest`` under ``ref`` and ``params``: from the store, a remote, or
    extracted now (here, or by ``executor``). Returns ``(id, computed, extraction stats)``."""
    stats: dict[str, Any] = {}
    if executor is not None:  # workers rebuild the backbone from its request (none: shipped built)
        extract_options.update(executor=executor, recipe=ref.request or None)

    def compute() -> str:
        from ..features import extract_featureset  # torch: only when something is extracted

        featureset, done = extract_featureset(
            store, manifest, ref.id, params, ref.load, device=resolve_device(device),
            progress=progress, **extract_options)
        stats.update(done.as_dict())
        return featureset

    derived = derive(store, featureset_spec(ref.id, manifest.id, params), compute,
                     valid=lambda o: packs_present(store, o), known={manifest.id: manifest.doc})
    if derived.remote is not None:
        stats["remote"] = derived.remote  # a cached answer says where it came from
    return derived.id, derived.computed, stats
