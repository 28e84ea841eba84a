"""VisBench's feature cache, as vbstore keeps it: the feature packs in the store.

``cache stats`` counts them, ``cache clear [--backbone B]`` evicts them (the store's eviction:
blobs removed, rows kept marked evicted, extracted again by the next request that needs them).
A backbone is named as vbstore names one in a spec or a listing: its architecture
(``test_vit``), ``source:architecture`` (``timm:resnet18``), or a backbone object's id or
prefix; a name covers every weights and input size of that architecture, a backbone id one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..records import BackboneRecord
from ..store import evict_features, feature_packs

if TYPE_CHECKING:
    from ..store import Store


def backbones_named(store: Store, name: str) -> list[str]:
    """The backbone objects ``name`` names (see the module docstring), in id order.

    Raises:
        UsageError: it names no stored backbone (with the ones stored).
    """
    found, names = [], set()
    for info in store.ls("backbone"):
        record = BackboneRecord.from_dict(store.read_json(info.id))
        names.add(record.name)
        if name in (record.architecture, record.name) or (
                len(name) >= 4 and info.id.startswith(name.lower())):
            found.append(info.id)
    if not found:
        known = ", ".join(sorted(names)) or "none yet"
        raise UsageError(f"no stored backbone is {name!r} (stored: {known})",
                         hint="name one as `vbstore ls backbone` lists it, or its id")
    return found


def feature_cache(store: Store, backbone: str | None = None) -> dict[str, Any]:
    """What ``cache clear`` would evict: ``{"backbones", "packs", "bytes"}``."""
    ids = backbones_named(store, backbone) if backbone is not None else None
    packs = feature_packs(store, ids)
    return {"backbones": ids, "packs": len(packs), "bytes": sum(p["size"] for p in packs)}


def clear_feature_cache(store: Store, backbone: str | None = None) -> dict[str, Any]:
    """Evict the feature packs of ``backbone`` (None: every backbone); what went:
    ``{"backbones", "packs", "bytes"}``.

    Raises:
        UsageError: ``backbone`` names no stored backbone.
        StoreLocked: a computation is running in the store.
    """
    ids = backbones_named(store, backbone) if backbone is not None else None
    evicted = evict_features(store, ids)
    return {"backbones": ids, "packs": len(evicted), "bytes": sum(p["size"] for p in evicted)}
