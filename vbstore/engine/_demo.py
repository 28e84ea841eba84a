"""The dense demo's setup: which ``scenes`` folder and parameters each dense task reads.

``scenes`` (see ``vbstore.data``) carries a target folder per dense probe; a task whose target
comes from the pixels (``corner``, ``orientation``) reads the images alone. No torch here: the
demo plans with it before anything is computed.
"""

from __future__ import annotations

from typing import Any

from ..data import SCENE_CLASSES
from ..errors import UsageError
from ..tasks import list_tasks

# the scenes folder of each dense task with a stored target; the rest derive theirs from pixels
SCENES_FOLDERS = {
    "semantic_segmentation": "labels", "generic_segmentation": "masks", "depth": "depth",
    "surface_normal": "normals", "edge": "edges", "occlusion_edge": "occlusion_edges",
    "keypoints2d": "keypoints",
}


def dense_tasks() -> list[str]:
    """The registered trained dense tasks, by name."""
    return list_tasks(shapes=("dense", "boxes"))


def scenes_setup(task: str, per_split: int, size: int, seed: int
                 ) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(data, data options, task params) to run dense ``task`` on a generated ``scenes`` set.

    Raises:
        UsageError: ``task`` is not a dense task.
    """
    if task not in dense_tasks():
        raise UsageError(f"task {task!r} is not a dense probe",
                         hint=f"dense tasks: {', '.join(dense_tasks())}")
    data = f"scenes:per_split={per_split},size={size},seed={seed}"
    options = {"target": SCENES_FOLDERS[task]} if task in SCENES_FOLDERS else {}
    # scenes state their depth unit (targets.json); the class count is the task's own setting
    params: dict[str, Any] = {}
    if task == "semantic_segmentation":
        params["num_classes"] = len(SCENE_CLASSES)
    return data, options, params
