"""relative_pose: the rotation and direction metrics against scipy, the 6D head, the trivial
predictor, and a probe that beats it on generated scene pairs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from vbstore.data import load_manifest, make_scenes
from vbstore.tasks import TaskInputError, UndefinedMetric, get_task
from vbstore.tasks.relative_pose import (
    direction_error,
    pose_metrics,
    quaternion_to_matrix,
    rotation_error,
    rotation_from_6d,
    trivial_metrics,
)


def _pairs(rotations: Rotation, translations) -> torch.Tensor:
    xyzw = rotations.as_quat()
    wxyz = np.concatenate([xyzw[:, 3:], xyzw[:, :3]], axis=1)
    n = len(wxyz)
    index = np.stack([np.arange(n), np.arange(n)], axis=1)
    return torch.tensor(np.concatenate([index, wxyz, translations], axis=1), dtype=torch.float64)


def test_rotation_error_and_quaternions_against_scipy():
    pred, truth = Rotation.random(50, random_state=0), Rotation.random(50, random_state=1)
    expected = np.degrees((pred.inv() * truth).magnitude())
    got = rotation_error(torch.tensor(pred.as_matrix()), torch.tensor(truth.as_matrix()))
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-6)
    pairs = _pairs(truth, np.ones((50, 3)))
    np.testing.assert_allclose(quaternion_to_matrix(pairs[:, 2:6]).numpy(), truth.as_matrix(),
                               atol=1e-12)


def test_6d_rotations_round_trip_and_orthonormalise():
    rot = torch.tensor(Rotation.random(10, random_state=2).as_matrix())
    six = torch.cat([rot[:, :, 0], rot[:, :, 1]], dim=1)
    torch.testing.assert_close(rotation_from_6d(six), rot)
    out = rotation_from_6d(torch.randn(10, 6, dtype=torch.float64))
    torch.testing.assert_close(out @ out.transpose(1, 2), torch.eye(3, dtype=torch.float64)
                               .expand(10, 3, 3))
    assert torch.allclose(torch.det(out), torch.ones(10, dtype=torch.float64))


def test_pose_metrics_by_hand():
    angles = np.array([5.0, 10.0, 20.0, 40.0])  # rotations about y; prediction: identity
    truth = _pairs(Rotation.from_euler("y", angles[:, None], degrees=True),
                   [[1, 0, 0], [0, 1, 0], [0, 0, 0], [1, 1, 0]])
    metrics = pose_metrics(torch.eye(3, dtype=torch.float64).expand(4, 3, 3),
                           torch.tensor([[1.0, 0, 0]] * 4), truth)
    assert metrics["rotation_error"] == pytest.approx(15.0)  # the median of 5, 10, 20, 40
    assert metrics["translation_error"] == pytest.approx(45.0)  # 0, 90, 45 (t = 0: left out)
    assert metrics["acc@15deg"] == 0.5
    assert metrics["acc@30deg"] == 0.75
    assert np.isnan(float(direction_error(torch.zeros(1, 3), torch.ones(1, 3))[0]))
    still = _pairs(Rotation.identity(2), np.zeros((2, 3)))
    with pytest.raises(UndefinedMetric, match="zero translation"):
        pose_metrics(torch.eye(3).expand(2, 3, 3), torch.ones(2, 3), still)


def test_the_trivial_predictor_is_the_mean_pose():
    angles = np.array([-20.0, -10.0, 10.0, 20.0])
    truth = _pairs(Rotation.from_euler("y", angles[:, None], degrees=True), [[0, 0, 1.0]] * 4)
    metrics = trivial_metrics(truth, truth)  # the chordal mean of symmetric turns: identity
    assert metrics["rotation_error"] == pytest.approx(15.0)
    assert metrics["translation_error"] == pytest.approx(0.0, abs=1e-6)


def test_bad_pairs_are_refused():
    task = get_task("relative_pose")
    with pytest.raises(TaskInputError, match="outside the 2 feature rows"):
        task.fit(torch.randn(2, 4), torch.tensor([[0, 5, 1, 0, 0, 0, 1, 0, 0.0]]))
    with pytest.raises(TaskInputError, match="unit quaternions"):
        task.fit(torch.randn(2, 4), torch.tensor([[0, 1, 2, 0, 0, 0, 1, 0, 0.0]]))


def _thumbnails(store, root, split):
    """Each image as an 8 x 8 grey thumbnail: features that keep where things are."""
    view = load_manifest(store, root, split=split, layout="pairs")
    feats = np.stack([np.asarray(view.load_image(i).convert("L").resize((8, 8), 2), np.float32)
                      .ravel() for i in range(len(view.samples))])
    return torch.tensor(feats), torch.tensor(view.doc["pairs"], dtype=torch.float64)


@pytest.mark.slow
def test_the_probe_beats_the_trivial_predictor_on_scene_pairs(store, tmp_path):
    root = make_scenes(tmp_path / "scenes", per_split=96, seed=0, size=32)
    x_train, train = _thumbnails(store, root, "train")
    x_val, val = _thumbnails(store, root, "val")
    task = get_task("relative_pose")
    head, train_metrics = task.fit(x_train, train, {}, seed=0)
    probe = task.evaluate(head, x_val, val)
    trivial = trivial_metrics(train, val)
    assert probe["rotation_error"] < 0.85 * trivial["rotation_error"]  # the headline
    assert probe["acc@15deg"] > trivial["acc@15deg"]
    assert train_metrics["train_rotation_error"] < probe["rotation_error"]
