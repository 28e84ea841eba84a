"""A featureset's derivation: its spec, whether its packs are all there, and deriving it (from the
store, a remote, or extracted now); ``._getfeatures`` and the result's compute path call it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..features import OP_VERSION
from ..store import Made, derivation_spec
from ._backbone import BackboneRef
from ._cache import Derived, derive
from ._device import resolve_device


def featureset_spec(backbone_id: str, manifest_id: str, params) -> dict[str, Any]:
    return derivation_spec("featureset", OP_VERSION,
                           {"backbone": backbone_id, "manifest": manifest_id}, params.to_dict())


def packs_present(store, featureset_id: str) -> bool:
    """A featureset hit counts only with all its packs; using them refreshes them for gc."""
    packs = store.read_json(featureset_id)["packs"]
    store.touch(packs)
    return all(store.has(p) for p in packs)


def derive_featureset(store, ref: BackboneRef, manifest, params, *,
                      spec: dict[str, Any] | None = None, key: str | None = None,
                      device: str | None = None, progress: bool | Callable[..., Any] = True,
                      executor: Any = None, **extract_options: Any) -> Derived:
    """The featureset of ``manifest`` under ``ref`` and ``params``: from the store, a remote, or
    extracted now (here, or by ``executor``), derived under ``spec`` and ``key`` (a plan's step;
    None: made here). ``made`` is the extraction's counts when it computed."""
    if spec is None:
        spec = featureset_spec(ref.id, manifest.id, params)
    if executor is not None:  # workers rebuild the backbone from its request (none: shipped built)
        extract_options.update(executor=executor, recipe=ref.request or None)

    def compute() -> Made[dict[str, Any]]:
        from ..features import extract_featureset  # torch: only when something is extracted

        featureset, done = extract_featureset(
            store, manifest, ref.id, params, ref.load, device=resolve_device(device),
            progress=progress, **extract_options)
        return Made(featureset, done.as_dict())

    return derive(store, spec, compute, key=key, valid=lambda o: packs_present(store, o),
                  known={manifest.id: manifest.doc})
