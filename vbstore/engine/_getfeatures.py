"""``get_features``: a :class:`FeaturesRequest`, its plan (backbone, manifest, featureset), then
only the missing extraction, under the key the plan made."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._fields import options_of, split_keywords
from ..data import decode_once, load_manifest
from ..errors import UsageError, field_ref
from ..features import ExtractorParams
from ..store import Store
from ._backbone import BackboneRef, resolve_backbone
from ._features import derive_featureset
from ._options import FeatureOptions, RunOptions
from ._requests import BackboneRequest, DataRef, FeaturesRequest, layers_arg
from ._steps import Step, featureset_step


@dataclass
class FeaturesPlan:
    """A resolved :class:`FeaturesRequest` and its steps; :func:`execute_features` runs it.

    Attributes:
        ref: The backbone (built when the store had never seen it).
        manifest: The split's manifest (stored).
        extractor: The extractor settings.
        steps: ``backbone``, ``manifest``, then the ``featureset`` step, whose spec and key
            execute derives under.
    """

    store: Store
    request: FeaturesRequest
    ref: BackboneRef
    manifest: Any
    extractor: ExtractorParams
    steps: list[Step] = field(default_factory=list)

    @property
    def featureset(self) -> Step:
        return self.steps[-1]

    def as_dict(self) -> dict[str, Any]:
        return {"backbone": self.ref.id, "extractor": self.extractor.to_dict(),
                "steps": [s.as_dict() for s in self.steps]}

    def describe(self) -> list[str]:
        return [s.describe() for s in self.steps]


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
                "samples": len(self.manifest), "extractor": self.params.to_dict(),
                "from_cache": self.from_cache, "source": self.source, "stats": self.stats}


def plan_features(request: FeaturesRequest, store: Store | None = None) -> FeaturesPlan:
    """Resolve ``request``: its backbone (built when never seen), its manifest (stored), the
    extractor settings and the featureset's derivation, stored or to compute.

    Raises:
        UsageError: a bad extractor setting; UnknownBackbone, BadInput... from below.
    """
    store = store if store is not None else Store()
    b = request.backbone
    ref = resolve_backbone(store, b.spec, weights=b.weights, seed=b.seed,
                           input_size=b.input_size, use_projection=request.use_projection)
    manifest = load_manifest(store, request.data.source, split=request.data.split,
                             limit=request.data.limit, **request.data.options)
    extractor = ExtractorParams(layers=b.layers, pooling=b.pooling or ref.default_pooling,
                                mode=request.mode, precision=b.precision,
                                dense_dtype=request.dense_dtype,
                                input_size=ref.keyed_input_size(b.input_size))
    steps = [Step("backbone", status="stored", id=ref.id),
             Step("manifest", status="stored", id=manifest.id, work={"samples": len(manifest)}),
             featureset_step(store, ref, manifest, extractor, "", False, False)]
    return FeaturesPlan(store, request, ref, manifest, extractor, steps)


def execute_features(the_plan: FeaturesPlan, *, device: str | None = None,
                     progress: bool | Callable[..., Any] = True, batch_size: int = 32,
                     workers: int = 2, loader: str = "threads", executor: Any = None
                     ) -> FeatureResult:
    """The featureset ``the_plan`` names: from the store, a remote, or extracted now (here, or
    by ``executor``), derived under the plan's key."""
    step = the_plan.featureset
    derived = derive_featureset(the_plan.store, the_plan.ref, the_plan.manifest,
                                the_plan.extractor, spec=step.spec, key=step.key, device=device,
                                progress=progress, executor=executor, batch_size=batch_size,
                                workers=workers, loader=loader)
    stats = dict(derived.made or {})
    if derived.remote is not None:
        stats["remote"] = derived.remote  # a cached answer says where it came from
    return FeatureResult(derived.id, the_plan.ref, the_plan.manifest, the_plan.extractor,
                         not derived.computed, stats)


def get_features(backbone: Any, data: Any, **options: Any) -> FeatureResult:
    """Features of ``data`` under ``backbone``, computing only what the store lacks: the keyword
    form of ``vbstore.get(FeaturesRequest(...))``. ``options`` are the fields of
    :class:`~vbstore.engine.FeatureOptions` and :class:`~vbstore.engine.RunOptions` but
    ``recompute``.

    ```python
    result = vbstore.get_features("test_vit", "path/to/images", split="val", weights="random")
    x = result.features.pooled()     # (N, C)
    ```

    ``executor=vbstore.features.RayExecutor(address="auto")`` extracts on a Ray cluster instead
    (the same featureset id); None extracts here.

    Raises:
        TypeError: a keyword that is no field of either.
        UsageError: ``recompute`` (a feature set is a derivation: recompute a result).
    """
    asked, how = split_keywords(options, FeatureOptions, RunOptions)
    o: FeatureOptions = options_of(FeatureOptions, asked, "get_features")
    run: RunOptions = options_of(RunOptions, how, "get_features")
    if run.recompute:
        raise UsageError("a featureset is not recomputed on its own",
                         hint=f"recompute a result that reads it ({field_ref('recompute')})")
    request = FeaturesRequest(
        BackboneRequest(backbone, weights=o.weights, seed=o.seed, input_size=o.input_size,
                        layers=layers_arg(o.layers), pooling=o.pooling, precision=o.precision),
        DataRef(data, split=o.split, limit=o.limit, options=o.data_options or {}),
        mode=o.mode, dense_dtype=o.dense_dtype, use_projection=o.use_projection)
    with decode_once():  # as get's: each image decoded once in this request
        return execute_features(plan_features(request, run.store), device=run.device,
                                progress=run.progress, batch_size=run.batch_size,
                                workers=o.workers, loader=o.loader, executor=run.executor)
