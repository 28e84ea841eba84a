"""VisBench 0.27's four named questions on shared machinery: ``scene_classification``,
``fine_grained_classification``, ``vehicle_classification`` (classification's linear probe) and
``scene_parsing`` (semantic segmentation's dense probe).

In VisBench (``tasks/high_level/``) each is a subclass that changes only the task name and the
record's ``protocol`` string: "one implementation, four questions". They are not aliases there
and are not here: a result is keyed by its task's name, so a Places365 run under
``scene_classification`` and an ImageNet run under ``classification`` land on two boards and
never in one ranking. Each keeps the parent's head, schedule, metrics and defaults, with one
exception VisBench makes too: ``scene_parsing`` is named for the NYUv2-40 label set, so
``num_classes`` defaults to 40 (255 is void, ignored as ever). The ``protocol`` strings are
VisBench's, recorded in each result as VisBench records them in ``task_params``.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from ._registry import register_task
from .classification import LinearClassification
from .segmentation import SemanticSegmentation

# NYUv2's forty classes at 0..39, 255 the void (VisBench's NYU40_CLASSES)
NYU40_CLASSES = 40


@register_task(name="scene_classification")
class SceneClassification(LinearClassification):
    """Linear probe on scene / place categories (Places365); classification's probe."""

    protocol = "visbench_scene_linear_probe"


@register_task(name="fine_grained_classification")
class FineGrainedClassification(LinearClassification):
    """Linear probe on subordinate categories (species: CUB-200); classification's probe."""

    protocol = "visbench_fine_grained_linear_probe"


@register_task(name="vehicle_classification")
class VehicleClassification(LinearClassification):
    """Linear probe on car models (Stanford Cars); classification's probe."""

    protocol = "visbench_vehicle_linear_probe"


@register_task(name="scene_parsing")
class SceneParsing(SemanticSegmentation):
    """Dense category prediction over indoor scenes (NYUv2-40); semantic segmentation's probe,
    40 classes by default."""

    protocol = "visbench_scene_parsing"
    params = MappingProxyType({
        **SemanticSegmentation.params,
        "num_classes": replace(SemanticSegmentation.params["num_classes"],
                               default=NYU40_CLASSES,
                               help="number of classes (>= 2; NYUv2-40's 40 by default)"),
    })
