"""A new head on stored features loads no torch: the linear probes (``PooledTask.array =
"numpy"``) train, score, bootstrap, judge their baseline and store their head in numpy, and a
stored head (of any version) applies to stored rows the same way. A run that names an
accelerator trains the same recipe there, in torch."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import vbstore
from vbstore.features import pooled_rows
from vbstore.heads import load_head
from vbstore.tasks import get_task
from vbstore.tasks.bootstrap import resamples

# what a head on stored rows must not load: torch, and every module built on it (the backbones,
# the model machinery, image decoding, the torch checks and metrics)
UNLOADED = ("torch", "torchvision", "timm", "open_clip", "PIL", "safetensors.torch",
            "vbstore.backbones._base", "vbstore.features._read", "vbstore.features._extract",
            "vbstore.features._packs", "vbstore.tasks._checks", "vbstore.tasks._metrics",
            "vbstore.tasks._linear_torch")
KW = dict(split="val", train_split="train", weights="random", input_size=32, progress=False)
TRACE = ("import sys, json, vbstore.cli\nUNLOADED = {unloaded!r}\n"
         "try:\n    vbstore.cli.cli(sys.argv[1:], standalone_mode=False)\n"
         "finally:\n    print(json.dumps(sorted(m for m in UNLOADED if m in sys.modules)))")


def _traced(args):
    """``vbstore ARGS --json`` in a fresh process: its answer and the UNLOADED modules it
    loaded."""
    proc = subprocess.run([sys.executable, "-c", TRACE.format(unloaded=UNLOADED), *args],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    return json.loads(out[: out.rindex("[")]), json.loads(out[out.rindex("["):])


@pytest.mark.parametrize("task", ["classification", "multilabel"])
def test_a_new_head_on_stored_features_loads_no_torch(tmp_path, shapes, task):
    question = ["--store", str(tmp_path), "get", "result", "-b", "test_cnn", "-d", shapes,
                "--split", "val", "--weights", "random", "--input-size", "32", "--json",
                "-t", task]
    base = [*question, "--train-data", shapes, "--train-split", "train"]
    first = subprocess.run([sys.executable, "-m", "vbstore", *base, "-p", "epochs=2"],
                           capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    answer, loaded = _traced([*base, "-p", "epochs=3"])
    assert loaded == []
    assert not answer["from_cache"]  # a new head, trained now on the stored rows
    assert answer["features"]["eval"]["stored"]
    assert answer["features"]["train"]["stored"]
    record = answer["record"]
    assert record["sample_ci"]
    assert record["baseline"]["metrics"]
    assert answer["run"]["device"].startswith("cpu")
    head = record["inputs"]["head"]
    # the head is the one the task trains in this process on the same rows and seed
    with vbstore.Store(tmp_path) as store:
        state, _, _ = load_head(store, head, array="numpy")
        train = answer["features"]["train"]["id"]
        rows = pooled_rows(store, train)
        manifest = store.read_json(record["inputs"]["train_manifest"])
    labels = np.array([s["label"] for s in manifest["samples"]])
    classes = manifest["classes"]
    targets = labels if task == "classification" else np.eye(len(classes))[labels]
    fitted, _ = get_task(task).fit(rows, targets, {"epochs": 3}, seed=0, class_names=classes)
    assert set(fitted) == set(state)
    assert all(np.array_equal(fitted[k], state[k]) for k in state)
    # applying the stored head to the stored eval rows: torch-free too, the same numbers
    applied, loaded = _traced([*question, "--head", head])
    assert loaded == []
    assert applied["record"]["metrics"] == record["metrics"]


def test_the_bootstrap_draws_are_torchs(tmp_path):
    """The draws come without torch and are torch.randint's, block after block, so every
    stored interval keeps its numbers and backbones stay resampled alike."""
    for n_rows, n_boot in ((1, 3), (37, 1000), (1000, 200), (5000, 1000)):
        generator = torch.Generator().manual_seed(0)
        step = max(1, (1 << 22) // n_rows)
        for start, block in zip(range(0, n_boot, step), resamples(n_rows, n_boot),
                                strict=True):
            expected = torch.randint(n_rows, (min(step, n_boot - start), n_rows),
                                     generator=generator)
            assert np.array_equal(block, expected.numpy())


def test_a_run_on_an_accelerator_trains_the_recipe_in_torch(store, tmp_path, shapes,
                                                            monkeypatch):
    """``--device cuda``: the features go to the device as torch tensors, the head trains there
    by the torch twin of the recipe and is scored there. No GPU here: the CPU stands in for the
    device (the run's device resolves to it, and its tensors count as an accelerator's)."""
    from vbstore.engine import _compute, _device, _features, _toolbox
    from vbstore.tasks import _linear_torch, _shape_pooled

    calls = []
    real = _linear_torch.train
    monkeypatch.setattr(_linear_torch, "train",
                        lambda x, *a, **k: calls.append(type(x).__name__) or real(x, *a, **k))
    with vbstore.Store(tmp_path / "plain") as other:
        plain = vbstore.get_result("test_cnn", "classification", shapes, shapes, store=other,
                                   params={"epochs": 4}, **KW)
    assert calls == []  # the CPU: numpy
    for module in (_device, _compute, _features, _toolbox):  # every reader of the device
        monkeypatch.setattr(module, "resolve_device", lambda device: "cpu")
    monkeypatch.setattr(_shape_pooled, "on_accelerator", lambda x: isinstance(x, torch.Tensor))
    device = vbstore.get_result("test_cnn", "classification", shapes, shapes, store=store,
                                params={"epochs": 4}, device="cuda", **KW)
    assert calls == ["Tensor"]  # the device's tensors, trained by torch
    assert device.record.metrics == pytest.approx(plain.record.metrics, abs=1 / 30)
    assert device.record.sample_ci["top1"]["n_boot"] == plain.record.sample_ci["top1"]["n_boot"]
