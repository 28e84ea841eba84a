"""Relative camera pose between two views of one scene, regressed from pooled dense features.

Each pair is two images and the pose taking camera A's coordinates to camera B's,
``X_b = R X_a + t`` (read from the data as a unit quaternion and a translation). The probe:

- input: each view's dense features (last requested layer) average-pooled to ``grid`` x
  ``grid`` cells and flattened ("pooled dense": ``grid`` 1 is the mean patch feature; a pose is
  about where things are, which one global vector barely keeps), standardised with the train
  images' mean and std; a pair is A's vector then B's, ``[f_a, f_b]`` (so the pose of B from A
  differs from the pose of A from B);
- head: a two-layer MLP (``hidden`` units, ReLU; ``hidden = 0``: linear) with nine outputs, the
  rotation in the continuous 6D form of Zhou et al. (2019; two columns of R, made orthonormal
  by Gram-Schmidt) and a translation direction (normalised: the scale of t is not asked for,
  as two views alone cannot give it);
- loss: the squared Frobenius distance of the rotations plus ``1 - cos`` of the translation
  directions; AdamW, cosine decay to 0, minibatches drawn by the seed's own generator;
- metrics: ``rotation_error``, the median geodesic angle between the predicted and true
  rotation in degrees (the headline); ``translation_error``, the median angle between the
  predicted and true translation directions (pairs with ``t = 0`` have none and are left out);
  ``acc@15deg`` and ``acc@30deg``, the share of pairs whose rotation error is within 15 and 30
  degrees (RelPose's rotation accuracy).

The trivial predictor (:func:`trivial_metrics`) predicts every pair as the train pairs' mean
pose: their chordal mean rotation (the mean matrix projected onto SO(3)) and mean direction.
"""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .._progress import progress
from ._base import HeadState, Metric, Param
from ._errors import TaskInputError, TrainingDiverged, UndefinedMetric
from ._registry import register_task
from ._shape_pooled import PairsTask

if TYPE_CHECKING:
    import torch

# Local imports: torch and the training helpers load when the probe trains or scores; the task
# registry imports this module on every cached `get`.

ACCURACY_DEGREES = (15, 30)


def quaternion_to_matrix(q: torch.Tensor) -> torch.Tensor:
    """(P, 4) unit quaternions ``(w, x, y, z)`` -> (P, 3, 3) rotation matrices."""
    import torch

    q = q / q.norm(dim=1, keepdim=True)
    w, x, y, z = q.unbind(dim=1)
    return torch.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ], dim=1).reshape(-1, 3, 3)


def rotation_from_6d(x: torch.Tensor) -> torch.Tensor:
    """(P, 6) -> (P, 3, 3): the two 3-vectors made orthonormal (Gram-Schmidt) are R's first two
    columns, their cross product the third (Zhou et al., 2019)."""
    import torch

    a, b = x[:, :3], x[:, 3:]
    c1 = torch.nn.functional.normalize(a, dim=1)
    c2 = torch.nn.functional.normalize(b - (c1 * b).sum(dim=1, keepdim=True) * c1, dim=1)
    return torch.stack([c1, c2, torch.linalg.cross(c1, c2, dim=1)], dim=2)


def rotation_error(pred: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """(P,) geodesic angles in degrees between rotation matrices (P, 3, 3)."""
    import torch

    trace = torch.einsum("pij,pij->p", pred.to(torch.float64), truth.to(torch.float64))
    return torch.rad2deg(torch.arccos(((trace - 1) / 2).clamp(-1.0, 1.0)))


def direction_error(pred: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """(P,) angles in degrees between vectors (P, 3); NaN where either is zero."""
    import torch

    pred, truth = pred.to(torch.float64), truth.to(torch.float64)
    norms = pred.norm(dim=1) * truth.norm(dim=1)
    cos = (pred * truth).sum(dim=1) / norms
    angle = torch.rad2deg(torch.arccos(cos.clamp(-1.0, 1.0)))
    return torch.where(norms > 0, angle, torch.full_like(angle, math.nan))


def pose_metrics(rotation: torch.Tensor, direction: torch.Tensor, truth: torch.Tensor
                 ) -> dict[str, float]:
    """The metrics of predicted rotations (P, 3, 3) and directions (P, 3) against pairs
    (P, 9) ``[a, b, qw, qx, qy, qz, tx, ty, tz]``.

    Raises:
        UndefinedMetric: every pair has a zero translation (no direction to compare).
    """

    r_err = rotation_error(rotation, quaternion_to_matrix(truth[:, 2:6]))
    t_err = direction_error(direction, truth[:, 6:9])
    t_err = t_err[~t_err.isnan()]
    if not len(t_err):
        raise UndefinedMetric("relative_pose", "translation_error",
                              "every pair has a zero translation")
    out = {"rotation_error": float(r_err.quantile(0.5)),
           "translation_error": float(t_err.quantile(0.5))}
    out.update({f"acc@{d}deg": float((r_err <= d).double().mean()) for d in ACCURACY_DEGREES})
    return out


def _inputs(head: dict[str, torch.Tensor], feats: torch.Tensor, pairs: torch.Tensor
            ) -> torch.Tensor:
    """(P, 2C): each pair's standardised features, A's then B's."""
    import torch

    z = (feats.to(torch.float32) - head["mean"]) / head["std"]
    a, b = pairs[:, 0].long(), pairs[:, 1].long()
    return torch.cat([z[a], z[b]], dim=1)


def _forward(head: dict[str, torch.Tensor], x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The head's rotations (P, 3, 3) and unit directions (P, 3) for pair inputs ``x``."""
    import torch

    out = x @ head["w1"].T + head["b1"]
    if "w2" in head:
        out = torch.relu(out) @ head["w2"].T + head["b2"]
    identity = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 0.0], device=out.device)
    rotation = rotation_from_6d(out[:, :6] + identity)  # an untrained head predicts identity
    return rotation, torch.nn.functional.normalize(out[:, 6:], dim=1)


def fit_pose(feats: torch.Tensor, pairs: torch.Tensor, params: dict[str, Any], seed: int
             ) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """Train the head (see the module docstring); returns it and its train metrics.

    Raises:
        TrainingDiverged: the weights or the loss stopped being finite.
    """
    import torch

    from ._linear_torch import standardisation

    generator = torch.Generator().manual_seed(seed)
    mean, std = standardisation(feats.to(torch.float32))
    head: dict[str, torch.Tensor] = {"mean": mean, "std": std}
    x = _inputs(head, feats, pairs)
    dim, hidden = x.shape[1], params["hidden"]
    sizes = [(hidden, dim), (9, hidden)] if hidden else [(9, dim)]
    weights = []
    for k, (n_out, n_in) in enumerate(sizes, 1):
        bound = 1.0 / math.sqrt(n_in)
        w = ((torch.rand(n_out, n_in, generator=generator) * 2 - 1) * bound).requires_grad_(True)
        b = torch.zeros(n_out, requires_grad=True)
        head[f"w{k}"], head[f"b{k}"] = w, b
        weights.append(w)
    biases = [head[f"b{k}"] for k in range(1, len(sizes) + 1)]
    optimiser = torch.optim.AdamW([{"params": weights, "weight_decay": params["weight_decay"]},
                                   {"params": biases, "weight_decay": 0.0}], lr=params["lr"])
    rot_true = quaternion_to_matrix(pairs[:, 2:6]).to(torch.float32)
    t_true = torch.nn.functional.normalize(pairs[:, 6:9].to(torch.float32), dim=1)
    moved = pairs[:, 6:9].norm(dim=1) > 0
    n, batch = len(pairs), min(params["batch_size"], len(pairs))
    total = params["epochs"] * math.ceil(n / batch)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda step: 0.5 * (1.0 + math.cos(math.pi * step / total)))

    def loss_of(rows: torch.Tensor) -> torch.Tensor:
        rotation, direction = _forward(head, x[rows])
        loss = ((rotation - rot_true[rows]) ** 2).sum(dim=(1, 2)).mean()
        keep = moved[rows]
        if bool(keep.any()):
            loss = loss + (1 - (direction[keep] * t_true[rows][keep]).sum(dim=1)).mean()
        return loss

    with progress("training relative_pose head", params["epochs"], "epoch") as shown:
        for epoch in range(params["epochs"]):
            order = torch.randperm(n, generator=generator)
            for start in range(0, n, batch):
                optimiser.zero_grad(set_to_none=True)
                loss_of(order[start:start + batch]).backward()
                optimiser.step()
                schedule.step()
            if not all(bool(torch.isfinite(w).all()) for w in weights):
                raise TrainingDiverged(f"task 'relative_pose': the head's weights became NaN/Inf "
                                       f"in epoch {epoch + 1}",
                                       hint=f"lower lr (now {params['lr']:g})")
            shown.update(1)
    head = {k: v.detach() for k, v in head.items()}
    with torch.no_grad():
        final = float(loss_of(torch.arange(n)))
        rotation, direction = _forward(head, x)
        train = pose_metrics(rotation, direction, pairs)
    if not math.isfinite(final):
        raise TrainingDiverged("task 'relative_pose': the training loss is not finite",
                               hint=f"lower lr (now {params['lr']:g})")
    return head, {"train_loss": final, "train_rotation_error": train["rotation_error"]}


def trivial_metrics(train_pairs: torch.Tensor, eval_pairs: torch.Tensor) -> dict[str, float]:
    """The metrics of predicting every eval pair as the train pairs' mean pose (the chordal
    mean rotation, projected onto SO(3) by SVD, and the mean translation direction)."""
    import torch

    train_pairs, eval_pairs = train_pairs.to(torch.float64), eval_pairs.to(torch.float64)
    u, _, vh = torch.linalg.svd(quaternion_to_matrix(train_pairs[:, 2:6]).mean(dim=0))
    mean = u @ torch.diag(torch.tensor([1.0, 1.0, float(torch.det(u @ vh))],
                                       dtype=torch.float64)) @ vh
    direction = torch.nn.functional.normalize(train_pairs[:, 6:9], dim=1).mean(dim=0)
    p = len(eval_pairs)
    return pose_metrics(mean.expand(p, 3, 3), direction.expand(p, 3), eval_pairs)


@register_task(name="relative_pose")
class RelativePose(PairsTask):
    """Relative camera rotation and translation direction of view pairs, from pooled dense
    features."""

    level = "mid"
    op_version = 1
    shape = "pairs"
    target_kind = "pairs"
    stochastic = True
    protocol = "vbstore_relative_pose_6d"
    sample_ci_skip = ""
    params = MappingProxyType({
        "epochs": Param(200, "passes over the train pairs", minimum=1),
        "lr": Param(1e-3, "peak AdamW learning rate", above=0.0),
        "weight_decay": Param(1e-4, "decoupled AdamW weight decay", minimum=0.0),
        "batch_size": Param(64, "pairs per step", minimum=1),
        "hidden": Param(256, "hidden units of the MLP head (0: a linear head)", minimum=0),
        "grid": Param(2, "each view's dense map average-pooled to grid x grid cells (1: the "
                         "mean patch feature)", minimum=1, maximum=16),
    })
    metrics = (
        Metric("rotation_error", "lower", "median angle in degrees between the predicted and "
                                          "true relative rotation"),
        Metric("translation_error", "lower", "median angle in degrees between the predicted "
                                             "and true translation direction"),
        Metric("acc@15deg", "higher", "share of pairs with a rotation error within 15 degrees"),
        Metric("acc@30deg", "higher", "share of pairs with a rotation error within 30 degrees"),
    )
    train_metrics = (
        Metric("train_loss", "lower", "final training loss over the train pairs"),
        Metric("train_rotation_error", "lower", "rotation_error on the train pairs"),
    )
    headline = "rotation_error"

    def _fit(self, feats: torch.Tensor, targets: Any, params: dict[str, Any], seed: int,
             class_names: list[str] | None) -> tuple[HeadState, dict[str, float]]:
        return fit_pose(feats, targets, params, seed)

    def _evaluate(self, head: HeadState, feats: torch.Tensor, targets: Any,
                  params: dict[str, Any]) -> dict[str, float]:
        import torch

        if int(head["mean"].shape[0]) != int(feats.shape[1]):
            raise TaskInputError(f"the head was trained on {head['mean'].shape[0]}-wide "
                                 f"features, these are {feats.shape[1]}-wide")
        with torch.no_grad():
            rotation, direction = _forward(head, _inputs(head, feats, targets))
        return pose_metrics(rotation, direction, targets)
