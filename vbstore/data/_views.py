"""The derived dataset of warped views: its derivation, its folder, its manifest.

The pixels are made by :mod:`._warp` (numpy), imported only when the views are written; finding
views derived before costs a registry lookup.
"""

from __future__ import annotations

from pathlib import Path

from ..store import derivation_key, derivation_spec
from ._load import load_manifest
from ._packaged import once
from ._view import ManifestView

WARP_VERSION = 1  # bump when the views' pixels or homographies would change


def warp_spec(view: ManifestView, seed: int, max_warp: float) -> dict:
    """The derivation spec of the warped views of ``view``."""
    return derivation_spec("warp_views", WARP_VERSION, {"manifest": view.id},
                           {"seed": seed, "max_warp": max_warp})


def warped_views(store, view: ManifestView, seed: int, max_warp: float) -> ManifestView:
    """The manifest of ``view``'s warped copies (row i warps row i), derived once and reused.

    The views are written as ``<i>.png`` into ``datasets/views-v1-<key>/`` of the store and read
    with the ``images`` layout. Should the folder be deleted, it is written again with the same
    bytes; features already stored for the views are reused either way.

    Raises:
        BadInput: a source image missing or changed since its manifest was read.
    """
    spec = warp_spec(view, seed, max_warp)
    folder = store.root / "datasets" / f"views-v{WARP_VERSION}-{derivation_key(spec)[:32]}"

    def materialise() -> Path:
        if folder.is_dir():
            return folder
        from ._warp import write_views  # numpy: only when the views are written

        return once(folder, lambda tmp: write_views(view, seed, max_warp, tmp))

    def compute() -> str:
        return load_manifest(store, materialise(), layout="images").id

    oid = store.derive(spec, compute).id
    materialise()
    return ManifestView(folder.resolve(), oid, store.read_json(oid))


def find_warped_views(store, view: ManifestView, seed: int, max_warp: float) -> str | None:
    """The id of the warped views' manifest if it was derived before, else None (no writing)."""
    return store.lookup(derivation_key(warp_spec(view, seed, max_warp)))
