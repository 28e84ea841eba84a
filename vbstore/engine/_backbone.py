"""Backbone specs → ``backbone`` artifacts, without building the model when the store knows them.

The first time a spec is seen the model is built, its weights identity and record are stored
(``weights`` and ``backbone`` artifacts), and "this request → that backbone" is recorded as a
derivation with no inputs (op ``backbone``). After that the derivation answers, locally or from a
remote's binary cache, so a cached ``get`` never imports torch. When the model is built later
(features are missing), its record must hash to the recorded id; otherwise the weights or code
behind the spec changed and the old artifacts would be mislabelled, which is refused once (and
the spec is re-pointed at the new backbone).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..backbones import build_backbone, spec_params
from ..errors import BackboneDrift
from ..store import derivation_key, derivation_spec
from ._cache import answer_check, remote_fetch

# op_version of the request → backbone derivation
ALIAS_VERSION = 1


@dataclass
class BackboneRef:
    """A resolved backbone: its id and record, and the model built only on demand."""

    store: Any
    id: str
    doc: dict[str, Any]
    request: dict[str, Any] = field(default_factory=dict)
    alias: dict[str, Any] | None = None
    _built: Any = None

    @property
    def default_pooling(self) -> str:
        return self.doc["default_pooling"]

    def keyed_input_size(self, requested: int | None) -> int | None:
        """The input size an extractor key names for ``requested``: None when this backbone
        already preprocesses to it (its id says so), so an ``--input-size`` equal to the
        default is the same identity as leaving it out."""
        size = self.doc.get("preprocessing", {}).get("input_size")
        return None if requested is not None and requested == size else requested

    @property
    def weights_origin(self) -> str:
        return self.store.read_json(self.doc["weights"])["origin"]

    def load(self):
        """The built backbone (torch is imported here)."""
        if self._built is None:
            backbone = build_backbone(**self.request)
            found = _store_backbone(self.store, backbone)
            if found != self.id:
                if self.alias is not None:  # the spec means the new backbone from now on
                    self.store.record(self.alias, found)
                raise BackboneDrift(
                    f"{self.request['spec']} now builds backbone {found[:12]}, not the recorded "
                    f"{self.id[:12]} (other weights or model code); nothing was computed",
                    hint="run the command again to compute with the new backbone, or pin the "
                         "old weights with a checkpoint path",
                )
            self._built = backbone
        return self._built


def _store_backbone(store, backbone) -> str:
    weights = store.put_json(backbone.weights_record(), "weights")
    doc = {**backbone.record(), "weights": weights}
    return store.put_json(doc, "backbone", edges={"weights": weights})


def _alias(backbone: str, weights: str, seed: int | None, input_size: int | None,
           use_projection: bool) -> dict[str, Any]:
    # "this request resolves to that backbone" is recorded as a derivation with no inputs, so it
    # travels with pushed results and a teammate's store finds them without building the model
    return derivation_spec("backbone", ALIAS_VERSION, {}, spec_params(
        backbone, weights=weights, seed=seed, input_size=input_size, use_projection=use_projection))


def find_backbone(store, backbone: Any, *, weights: str = "default", seed: int | None = None,
                  input_size: int | None = None, use_projection: bool = False,
                  touch: bool = True) -> BackboneRef | None:
    """The ``backbone`` artifact for a spec when the store (or a remote) knows it; else None.

    Never builds a model, so never imports torch. ``touch=False``: see ``Store.lookup``.

    Raises:
        UnknownBackbone, InvalidSpec: from the spec parser.
    """
    if not isinstance(backbone, str):  # a Backbone object, e.g. a CustomBackbone: already built
        return resolve_backbone(store, backbone)
    alias = _alias(backbone, str(weights), seed, input_size, use_projection)
    key = derivation_key(alias)
    oid = store.lookup(key, touch=touch)
    fetch = remote_fetch(store) if oid is None else None
    if fetch is not None and fetch(key) is not None:
        oid = store.lookup(key)
    if oid is None:
        return None
    request = {"spec": backbone, "weights": str(weights), "seed": seed, "input_size": input_size,
               "use_projection": use_projection}
    doc = store.read_json(oid)
    answer_check(store, alias, {oid: doc})(oid, lambda: store.source(key))
    return BackboneRef(store, oid, doc, request, alias)


def resolve_backbone(store, backbone: Any, *, weights: str = "default", seed: int | None = None,
                     input_size: int | None = None, use_projection: bool = False,
                     touch: bool = True) -> BackboneRef:
    """The ``backbone`` artifact for a spec string (or an already built backbone object).

    ``touch=False`` applies to a backbone found stored: see ``Store.lookup``.

    Raises:
        UnknownBackbone, InvalidSpec, WeightsUnavailable, CheckpointNotFound: from the adapters.
    """
    if not isinstance(backbone, str):  # a Backbone object, e.g. a CustomBackbone
        oid = _store_backbone(store, backbone)
        return BackboneRef(store, oid, store.read_json(oid), _built=backbone)
    found = find_backbone(store, backbone, weights=weights, seed=seed, input_size=input_size,
                          use_projection=use_projection, touch=touch)
    if found is not None:
        return found
    # building imports torch (inside the adapter): only for a backbone never seen before
    request = {"spec": backbone, "weights": str(weights), "seed": seed, "input_size": input_size,
               "use_projection": use_projection}
    built = build_backbone(backbone, weights=str(weights), seed=seed, input_size=input_size,
                           use_projection=use_projection)
    alias = _alias(backbone, str(weights), seed, input_size, use_projection)
    # under the alias's lease: gc keeps what is written under a live lease until it is recorded
    with store.lease(derivation_key(alias)):
        oid = _store_backbone(store, built)
        store.record(alias, oid)
    return BackboneRef(store, oid, store.read_json(oid), request, alias, _built=built)
