"""Errors that stop short no more: suggestions name only what exists, a folder is named so."""

from __future__ import annotations

import pytest

from vbstore.backbones import build_backbone
from vbstore.errors import InvalidSpec, UnknownBackbone, UnknownTask
from vbstore.tasks import get_task


def test_a_task_name_in_capitals_is_suggested_in_lower_case():
    with pytest.raises(UnknownTask) as err:
        get_task("KNN")
    assert err.value.hint == "did you mean 'knn'?"


def test_a_missing_torchvision_model_suggests_only_models_that_exist():
    pytest.importorskip("torchvision")
    timm = pytest.importorskip("timm")
    assert not timm.list_models("resnet81")  # so suggesting timm:resnet81 would be wrong
    with pytest.raises(UnknownBackbone) as err:
        build_backbone("torchvision:resnet81", weights="random")
    assert "timm:resnet81" not in str(err.value)
    assert "torchvision:resnet18" in err.value.hint


def test_weights_naming_a_folder_says_so_and_names_the_file_inside(tmp_path):
    with pytest.raises(InvalidSpec) as err:
        build_backbone("test_cnn", weights=str(tmp_path))
    assert f"weights {tmp_path} is a folder, not a checkpoint file" in str(err.value)
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(InvalidSpec) as err:
        build_backbone("test_cnn", weights=str(tmp_path))
    assert err.value.hint == "name the file in it: model.safetensors"
