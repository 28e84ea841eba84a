"""The pure functions of ``correspondence``: patch centres, ratio-test matching, errors, metrics.

Imported when a correspondence is scored (numpy, torch), never by the task's declaration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..data import apply_homography
from ._errors import TaskInputError, UndefinedMetric
from ._view_pairs import UNITS, name_of, thresholds_of

if TYPE_CHECKING:
    import torch

    from ._view_pairs import Geometry, KeypointPairs, WarpPairs

# Local imports: torch loads when features are matched.

THRESHOLDS: tuple[float, ...] = (1, 2, 5, 10)


def patch_centres(grid_hw: tuple[int, int], input_size: int, size: tuple[int, int],
                  geometry: Geometry) -> np.ndarray:
    """(h * w, 2): the centre of every patch of the grid, row-major, in the original image's
    continuous pixel coordinates (x, y)."""
    gh, gw = grid_hw
    (new_w, new_h), box = geometry(*size)
    left, top = (box[0], box[1]) if box is not None else (0, 0)
    xs = (np.arange(gw) + 0.5) * input_size / gw + left
    ys = (np.arange(gh) + 0.5) * input_size / gh + top
    x, y = np.meshgrid(xs * size[0] / new_w, ys * size[1] / new_h)
    return np.stack([x.ravel(), y.ravel()], axis=1)


def seen_box(size: tuple[int, int], geometry: Geometry) -> tuple[float, float, float, float]:
    """The part of an image the backbone sees, in its pixel coordinates (x0, y0, x1, y1)."""
    (new_w, new_h), box = geometry(*size)
    if box is None:
        return 0.0, 0.0, float(size[0]), float(size[1])
    sx, sy = size[0] / new_w, size[1] / new_h
    return box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy


def nearest(fa: torch.Tensor, fb: torch.Tensor
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For a batch of pairs, each A patch's nearest B patch and its ratio ``d1 / d2``, and each
    B patch's nearest A patch.

    Args:
        fa, fb: (B, Na, C), (B, Nb, C) L2-normalised features.

    Returns:
        ratio (B, Na) (1 for a tie or when B has one patch), nn (B, Na), back (B, Nb).
    """
    import torch

    sim = torch.bmm(fa, fb.transpose(1, 2))
    back = sim.argmax(dim=1)
    if sim.shape[2] < 2:  # one patch in B: no second neighbour to test against
        ones = torch.ones(sim.shape[:2])
        return ones.numpy(), sim.argmax(dim=2).numpy(), back.numpy()
    top = sim.topk(2, dim=2)
    dist = (2 - 2 * top.values).clamp(min=0).sqrt()
    d1, d2 = dist[..., 0], dist[..., 1]
    ratio = torch.where(d2 > 0, d1 / d2.clamp(min=1e-12), torch.ones_like(d1))
    return ratio.numpy(), top.indices[..., 0].numpy(), back.numpy()


def select(ratio: np.ndarray, nn: np.ndarray, back: np.ndarray, query: np.ndarray, *,
           threshold: float, max_matches: int, mutual: bool) -> tuple[np.ndarray, np.ndarray]:
    """One pair's matches: queries passing the ratio test (and, with ``mutual``, each its
    match's nearest A patch), at most ``max_matches``, lowest ratio first (ties by index).

    Returns:
        (indices in A, indices in B).
    """
    keep = query & (ratio < threshold)
    if mutual:
        keep &= back[nn] == np.arange(len(nn))
    rows = np.flatnonzero(keep)
    rows = rows[np.argsort(ratio[rows], kind="stable")[:max_matches]]
    return rows, nn[rows]


def recall_auc(errors: np.ndarray, thresholds: tuple[float, ...] = THRESHOLDS,
               unit: str = "px") -> dict[str, float]:
    """``recall@T`` and ``auc@T`` at each threshold of one set of errors (NaN = no
    correspondence), the errors in ``unit`` (``px`` or ``p``, which only names them)."""
    e = np.nan_to_num(np.asarray(errors, np.float64).ravel(), nan=np.inf)
    if not len(e):
        return {f"{kind}@{name_of(t, unit)}": 0.0 for kind in ("recall", "auc") for t in thresholds}
    out = {f"recall@{name_of(t, unit)}": float(np.mean(e <= t)) for t in thresholds}
    out.update({f"auc@{name_of(t, unit)}": interpolated_auc(e, t) for t in thresholds})
    return out


def interpolated_auc(errors: np.ndarray, threshold: float) -> float:
    """VisBench's (and probe3d's) ``auc@T``: the area under the recall curve over [0, T], over T,
    the curve drawn straight from (0, 0) through each error at the recall it reaches, then flat
    at ``recall@T`` to T; 0 when no error is within T.

    That is the step curve's area (the mean of ``max(0, 1 - e / T)``, op_version 1's ``auc@T``)
    plus the triangle each straight segment adds above its step: each 1 / n high, their widths
    adding up to the largest error within T.
    """
    within = errors[errors <= threshold]
    if not len(within):
        return 0.0
    n = len(errors)
    return float((np.sum(threshold - within) + within.max() / 2) / (n * threshold))


def patch_spacing(grid_hw: tuple[int, int], input_size: int, size: tuple[int, int],
                  geometry: Geometry) -> float:
    """The distance between neighbouring patch centres, in pixels of an image of ``size``: the
    mean of the two axes' (VisBench's patch unit, in the original image's pixels)."""
    (new_w, new_h), _ = geometry(*size)
    gh, gw = grid_hw
    return float((input_size / gw * size[0] / new_w + input_size / gh * size[1] / new_h) / 2)


def pair_errors(ratio: np.ndarray, nn: np.ndarray, back_nn: np.ndarray, homography: np.ndarray,
                size: tuple[int, int], centres: np.ndarray, seen: tuple[float, ...],
                params: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, int]:
    """The errors (pixels of A) of one pair's matches, the grid's best error for each of
    them, and how many A patches were queries (their correspondence is in B's view).

    ``ratio``, ``nn``, ``back_nn`` are the pair's rows of :func:`nearest`; ``centres`` the
    patch centres of an image of ``size``; ``seen`` the part of it the backbone sees.
    """
    truth = apply_homography(homography, centres)  # where each A centre is in B
    x0, y0, x1, y1 = seen
    with np.errstate(invalid="ignore"):
        query = ((truth[:, 0] >= x0) & (truth[:, 0] < x1)
                 & (truth[:, 1] >= y0) & (truth[:, 1] < y1))
    back = apply_homography(np.linalg.inv(homography), centres)  # B centres, in A's pixels
    ia, ib = select(ratio, nn, back_nn, query, threshold=params["ratio"],
                    max_matches=params["max_matches"], mutual=params["mutual"])
    errors = np.linalg.norm(back[ib] - centres[ia], axis=1)
    # the ceiling: each matched A patch paired with the B patch whose centre lands nearest it
    gap = np.linalg.norm(centres[ia][:, None, :] - back[None, :, :], axis=2)
    best = np.where(np.isnan(gap), np.inf, gap).min(axis=1) if len(ia) else np.zeros(0)
    return errors, best, int(query.sum())


def summarise(errors: list[np.ndarray], best: list[np.ndarray],
              thresholds: tuple[float, ...] = THRESHOLDS, unit: str = "px") -> dict[str, float]:
    """The metrics of the matches of every pair, pooled (probe3d's convention: a pair with more
    matches weighs more); no match at all scores 0."""
    out = recall_auc(np.concatenate(errors), thresholds, unit)
    out.update({f"ceiling_{k}": v
                for k, v in recall_auc(np.concatenate(best), thresholds, unit).items()})
    out["num_matches"] = float(sum(len(e) for e in errors))
    return out


def _normalised(x: torch.Tensor) -> torch.Tensor:
    """(B, C, h, w) -> (B, h * w, C), each row of unit length."""
    import torch

    flat = x.to(torch.float32).flatten(2).transpose(1, 2)
    return torch.nn.functional.normalize(flat, dim=2)


def score_pairs(pairs: WarpPairs, params: dict[str, Any], batch_size: int = 32
                ) -> dict[str, float]:
    """The correspondence metrics of every pair (see the module docstring).

    Raises:
        TaskInputError: views that do not fit their images.
        UndefinedMetric: no pair has a patch whose correspondence B shows.
    """

    n = len(pairs.a)
    if len(pairs.b) != n or len(pairs.homographies) != n or len(pairs.sizes) != n:
        raise TaskInputError(f"{n} images but {len(pairs.b)} views, "
                             f"{len(pairs.homographies)} homographies, {len(pairs.sizes)} sizes")
    if tuple(pairs.a.grid_hw) != tuple(pairs.b.grid_hw):
        raise TaskInputError(f"images have a {pairs.a.grid_hw} patch grid, views "
                             f"{pairs.b.grid_hw}")
    thresholds, unit = thresholds_of(params)
    errors, best = [], []
    grids: dict[tuple[int, int], tuple[np.ndarray, tuple[float, ...]]] = {}
    spacing: dict[tuple[int, int], float] = {}  # 1 in pixels: errors stay in pixels
    for start in range(0, n, batch_size):
        rows = list(range(start, min(start + batch_size, n)))
        fa, fb = _normalised(pairs.a.feats(rows)[-1]), _normalised(pairs.b.feats(rows)[-1])
        ratio, nn, back = nearest(fa, fb)
        for k, row in enumerate(rows):
            size = (int(pairs.sizes[row][0]), int(pairs.sizes[row][1]))
            if size not in grids:  # images of one size share their patch centres
                grid_hw = (int(pairs.a.grid_hw[0]), int(pairs.a.grid_hw[1]))
                grids[size] = (patch_centres(grid_hw, pairs.input_size, size,
                                             pairs.geometry), seen_box(size, pairs.geometry))
                spacing[size] = (patch_spacing(grid_hw, pairs.input_size, size, pairs.geometry)
                                 if unit == UNITS["patch"] else 1.0)
            e, b, queries = pair_errors(ratio[k], nn[k], back[k], pairs.homographies[row],
                                        size, *grids[size], params)
            if queries:  # a pair whose B shows none of A's patches has nothing to score
                # per pair, before pooling: images of other sizes have other spacings
                errors.append(e / spacing[size])
                best.append(b / spacing[size])
    if not errors:
        raise UndefinedMetric("correspondence", f"recall@{name_of(min(thresholds), unit)}",
                              "no view shows any patch of its image: lower max_warp")
    return summarise(errors, best, thresholds, unit)


PCK_ALPHAS = (0.1, 0.05)


def keypoint_cells(points: np.ndarray, size: tuple[int, int], grid_hw: tuple[int, int],
                   input_size: int, geometry: Geometry) -> np.ndarray:
    """The grid cell (row-major index) under each ``[x, y]`` point of an image of ``size``;
    -1 for a point outside the part of the image the backbone sees."""
    (new_w, new_h), box = geometry(*size)
    left, top = (box[0], box[1]) if box is not None else (0, 0)
    x = points[:, 0] * new_w / size[0] - left
    y = points[:, 1] * new_h / size[1] - top
    gh, gw = grid_hw
    inside = (x >= 0) & (x < input_size) & (y >= 0) & (y < input_size)
    col = np.clip(np.floor(x * gw / input_size), 0, gw - 1).astype(np.int64)
    row = np.clip(np.floor(y * gh / input_size), 0, gh - 1).astype(np.int64)
    return np.where(inside, row * gw + col, -1)


def score_keypoints(pairs: KeypointPairs, batch_size: int = 32) -> dict[str, float]:
    """PCK of nearest-neighbour keypoint transfer, over every scored keypoint (pooled).

    Each source keypoint takes the feature of the patch it lies in; its prediction is the
    centre (in target pixels) of the most similar target patch (cosine); it is correct within
    ``alpha`` when that centre is at most ``alpha * max(box width, box height)`` from the
    annotated target keypoint.

    Raises:
        UndefinedMetric: no source keypoint lies inside what the backbone sees.
    """

    grid_hw = (int(pairs.feats.grid_hw[0]), int(pairs.feats.grid_hw[1]))
    errors, scales = [], []
    for start in range(0, len(pairs.pairs), batch_size):
        chunk = pairs.pairs[start:start + batch_size]
        rows = sorted({int(p[0]) for p in chunk} | {int(p[1]) for p in chunk})
        feats = _normalised(pairs.feats.feats(rows)[-1])
        at = {row: k for k, row in enumerate(rows)}
        for src, trg, src_kps, trg_kps, box in chunk:
            src_size = (int(pairs.sizes[src][0]), int(pairs.sizes[src][1]))
            trg_size = (int(pairs.sizes[trg][0]), int(pairs.sizes[trg][1]))
            if not (0 <= box[0] < box[2] <= trg_size[0] and 0 <= box[1] < box[3] <= trg_size[1]):
                # the box sets the threshold: one larger than its image passes any transfer
                raise TaskInputError(f"a pair's box {box} lies outside its "
                                     f"{trg_size[0]}x{trg_size[1]} target image",
                                     hint="read the pairs again from their annotation files")
            cells = keypoint_cells(np.asarray(src_kps, float), src_size, grid_hw,
                                   pairs.input_size, pairs.geometry)
            seen = cells >= 0
            if not seen.any():
                continue
            sim = feats[at[int(src)]][cells[seen]] @ feats[at[int(trg)]].T
            centres = patch_centres(grid_hw, pairs.input_size, trg_size, pairs.geometry)
            predicted = centres[sim.argmax(dim=1).numpy()]
            errors.append(np.linalg.norm(predicted - np.asarray(trg_kps, float)[seen], axis=1))
            scales.append(np.full(int(seen.sum()), max(box[2] - box[0], box[3] - box[1])))
    if not errors:
        raise UndefinedMetric("keypoint_correspondence", "pck@0.1",
                              "no source keypoint lies inside what the backbone sees")
    e, scale = np.concatenate(errors), np.concatenate(scales)
    out = {f"pck@{a:g}": float(np.mean(e <= a * scale)) for a in PCK_ALPHAS}
    out["num_keypoints"] = float(len(e))
    return out
