"""The dense demo's setup: which ``scenes`` folder and parameters each dense task reads.

``scenes`` (see ``vbstore.data``) carries a target folder per dense probe; a task whose target
comes from the pixels (``corner``, ``orientation``) reads the images alone. No torch here: the
demo plans with it before anything is computed.
"""

from __future__ import annotations

from typing import Any

from ..data import SCENE_CLASSES
from ..errors import UsageError
from ..tasks import DenseTask, get_task, list_tasks

# the scenes folder of each dense task with a stored target; the rest derive theirs from pixels
SCENES_FOLDERS = {
    "semantic_segmentation": "labels", "generic_segmentation": "masks", "depth": "depth",
    "surface_normal": "normals", "edge": "edges", "occlusion_edge": "occlusion_edges",
    "keypoints2d": "keypoints",
}


def dense_tasks() -> list[str]:
    """The registered trained dense tasks, by name."""
    return [n for n in list_tasks() if isinstance(get_task(n), DenseTask)]


def scenes_setup(task: str, per_split: int, size: int, seed: int
                 ) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(data, data options, task params) to run dense ``task`` on a generated ``scenes`` set.

    Raises:
        UsageError: ``task`` is not a dense task.
    """
    if not isinstance(get_task(task), DenseTask):
        raise UsageError(f"task {task!r} is not a dense probe",
                         hint=f"dense tasks: {', '.join(dense_tasks())}")
    data = f"scenes:per_split={per_split},size={size},seed={seed}"
    options = {"target": SCENES_FOLDERS[task]} if task in SCENES_FOLDERS else {}
    params: dict[str, Any] = {}
    if task == "semantic_segmentation":
        params["num_classes"] = len(SCENE_CLASSES)
    if task == "depth":
        params["target_scale"] = 1000.0  # scenes depth PNGs are in millimetres
    return data, options, params
