"""VisBench 0.27's named questions: ``scene_classification``, ``fine_grained_classification``,
``vehicle_classification`` (classification's probe) and ``scene_parsing`` (semantic
segmentation's, 40 classes by default). Tasks of their own, not aliases: the same numbers as
the shared probe under another id, so two questions never share a board."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from vbstore import Store
from vbstore.engine import execute, plan, result_request
from vbstore.tasks import get_task

QUESTIONS = {
    "scene_classification": ("classification", "visbench_scene_linear_probe"),
    "fine_grained_classification": ("classification", "visbench_fine_grained_linear_probe"),
    "vehicle_classification": ("classification", "visbench_vehicle_linear_probe"),
    "scene_parsing": ("semantic_segmentation", "visbench_scene_parsing"),
}


@pytest.mark.parametrize("name", sorted(QUESTIONS))
def test_each_question_is_its_probe_under_its_own_name(name):
    parent_name, protocol = QUESTIONS[name]
    task, parent = get_task(name), get_task(parent_name)
    assert task.protocol == protocol
    assert [m.name for m in task.metrics] == [m.name for m in parent.metrics]
    assert (task.level, task.op_version, task.target_kind) == (
        parent.level, parent.op_version, parent.target_kind)
    expected = parent.resolve_params()
    if name == "scene_parsing":  # named for NYUv2-40 (255 void)
        expected["num_classes"] = 40
    assert task.resolve_params() == expected


def test_scene_classification_scores_as_classification_under_another_id(tmp_path, shapes_folder):
    data = shapes_folder(3, 5)
    out = {}
    with Store(tmp_path / "s") as store:
        for name in ("classification", "scene_classification"):
            request = result_request("test_cnn", name, data, data, split="val",
                                     train_split="train", weights="random", input_size=32,
                                     params={"epochs": 5})
            out[name] = execute(plan(request, store))
    plain, scene = out["classification"], out["scene_classification"]
    assert scene.id != plain.id
    assert scene.record.metrics == plain.record.metrics
    assert scene.record.protocol == "visbench_scene_linear_probe"
    assert scene.record.task == "scene_classification"


PROTOCOL = """
import json, visbench
out = {}
for name in json.loads(__import__("sys").argv[1]):
    task = visbench.get_probe(name, num_classes=40) if name == "scene_parsing" else \\
        visbench.get_probe(name)
    out[name] = task.describe()["task_params"].get("protocol")
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_protocol_strings_are_visbenchs(visbench_site):
    done = subprocess.run([sys.executable, "-c", PROTOCOL, json.dumps(sorted(QUESTIONS))],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(visbench_site)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {name: p for name, (_, p) in QUESTIONS.items()}
