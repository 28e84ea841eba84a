"""Looking into a stored dense result: its eval split again, its trivial baseline, its pictures.

A result record names its eval manifest, eval features and head by id, but not where the data
lives on this machine (a manifest is location-independent). Each function here takes the data
again, re-reads it and refuses it unless it gives the very manifest the result was scored on,
so a baseline or a picture never pairs one dataset's targets with another's predictions.

Imported lazily (torch): nothing here runs on the cached path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..data import load_manifest
from ..errors import UsageError, field_ref
from ..heads import load_head
from ..records import ResultRecord
from ..tasks import DenseTask, as_dense, get_task
from ._dense import PackSplit
from ._device import resolve_device
from ._plan import data_options_for


@dataclass
class DenseView:
    """A dense result's eval split, read again: the split, its task and params, the record."""

    id: str
    record: ResultRecord
    task: DenseTask
    params: dict[str, Any]
    split: PackSplit
    store: Any


def open_dense_result(store, result: str, data: Any, *, split: str | None = None,
                      limit: int | None = None, data_options: Mapping[str, Any] | None = None,
                      device: str | None = None) -> DenseView:
    """The eval split of dense ``result`` (id or prefix), re-read from ``data``.

    Raises:
        UsageError: the result is not a dense task's, or ``data`` (with ``split``, ``limit`` and
            ``data_options``) gives another manifest than the one it was scored on.
        ObjectNotFound: no such result.
    """
    oid = store.resolve(result)
    doc = store.read_json(oid)
    if doc.get("kind") != "result":
        raise UsageError(f"{oid[:12]} is a {doc.get('kind')}, not a result")
    record = ResultRecord.from_dict(doc)
    task = as_dense(get_task(record.task), oid[:12])
    options = data_options_for(task, data_options or {}, data)
    manifest = load_manifest(store, data, split=split, limit=limit, **options)
    expected = record.inputs["eval_manifest"]
    if manifest.id != expected:
        raise UsageError(
            f"{data} (split {split}) is manifest {manifest.id[:12]}, but result {oid[:12]} was "
            f"scored on {expected[:12]}",
            hint=f"pass the data, {field_ref('split')}, {field_ref('limit')} and "
                 f"{field_ref('target')} the result was computed with")
    backbone = store.read_json(record.inputs["backbone"])
    params = task.resolve_params(record.params)
    view = PackSplit(store, record.inputs["eval_features"], manifest, backbone["preprocessing"],
                     task.target_kind, params.get("target_scale"), resolve_device(device))
    return DenseView(oid, record, task, params, view, store)


def baseline_metrics(view: DenseView) -> dict[str, float]:
    """The task's trivial predictor (``view.task.trivial``) scored on the result's eval split.

    Raises:
        UndefinedMetric: a metric the split cannot define.
    """
    return view.task.baseline_split(view.split, view.params)


@dataclass
class DenseSample:
    """One eval image, its target and the head's prediction, as arrays ready to draw.

    Attributes:
        name: The sample's name in the manifest.
        image: (H, W, 3) float32 RGB in [0, 1], as the backbone saw it.
        target: (H, W) or (H, W, 3) float32: the prepared target (see ``render``).
        prediction: The same shape as ``target``.
        kind: ``labels`` (class indices), ``scalar`` (a map), ``rgb`` (normals or orientation
            rendered as colours).
    """

    name: str
    image: np.ndarray
    target: np.ndarray
    prediction: np.ndarray
    kind: str


def dense_samples(view: DenseView, count: int = 4) -> list[DenseSample]:
    """The first ``count`` eval samples with the stored head's prediction (the first seed's).

    Raises:
        UsageError: ``count`` < 1, or the result was scored with no stored head.
        HeadMismatch: the head does not fit the features.
    """
    if count < 1:
        raise UsageError(f"count must be at least 1, got {count}")
    view.task.check_map_grid(view.id[:12])
    heads = view.record.inputs.get("head")
    if not heads:
        raise UsageError(f"result {view.id[:12]} has no stored head to draw from")
    head_id = heads[0] if isinstance(heads, list) else heads
    state, _, _ = load_head(view.store, head_id)
    out = []
    for row, target, pred in view.task.predict_split(state, view.split, view.params, count):
        t, p, kind = render(view.task.name, target.cpu(), pred.cpu(), view.params)
        image = view.split.image(row).transpose(1, 2, 0)
        out.append(DenseSample(view.split.name(row), image, t, p, kind))
    return out


def render(task: str, target: torch.Tensor, pred: torch.Tensor, params: dict[str, Any]
           ) -> tuple[np.ndarray, np.ndarray, str]:
    """One prepared target and its prediction as drawable arrays, and how to colour them.

    Class maps: indices (the prediction's argmax; foreground for a logit > 0), ignored pixels
    -1. Normals: (n + 1) / 2 as RGB, black where invalid. Orientation: hue = the axis angle,
    black where not scored (the prediction is shown everywhere). Depth and other maps: the
    value (depth 0 where invalid).
    """
    if task == "semantic_segmentation":
        t = torch.where(target == params["ignore_index"], -1, target)
        return t.numpy().astype(np.float32), pred.argmax(0).numpy().astype(np.float32), "labels"
    if task == "generic_segmentation":
        return (target.numpy().astype(np.float32),
                (pred[0] > 0).numpy().astype(np.float32), "labels")
    if task == "surface_normal":
        p = torch.nn.functional.normalize(pred[:3], dim=0)
        valid = target.abs().sum(0, keepdim=True) > 0
        return (((target + 1) / 2 * valid).permute(1, 2, 0).numpy(),
                ((p + 1) / 2).permute(1, 2, 0).numpy(), "rgb")
    if task == "orientation":
        everywhere = torch.ones_like(pred[0], dtype=torch.bool)
        return _hue(target, target.abs().sum(0) > 0), _hue(pred, everywhere), "rgb"
    return target[0].numpy().astype(np.float32), pred[0].numpy().astype(np.float32), "scalar"


def _hue(doubled: torch.Tensor, shown: torch.Tensor) -> np.ndarray:
    """Doubled-angle vectors as colours: hue = orientation (0-180 degrees), black where hidden."""
    hue = ((torch.atan2(doubled[1], doubled[0]) / (2 * np.pi)) % 1.0).numpy()  # 2t / 360 deg
    # HSV with full saturation and value, as matplotlib's hsv_to_rgb computes it
    i = np.floor(hue * 6).astype(int) % 6
    f = hue * 6 - np.floor(hue * 6)
    one, rise, fall, zero = np.ones_like(f), f, 1 - f, np.zeros_like(f)
    table = [(one, rise, zero), (fall, one, zero), (zero, one, rise), (zero, fall, one),
             (rise, zero, one), (one, zero, fall)]
    rgb = np.zeros((*hue.shape, 3), np.float32)
    for k, channels in enumerate(table):
        for c in range(3):
            rgb[..., c] = np.where(i == k, channels[c], rgb[..., c])
    return rgb * shown.numpy()[..., None]
