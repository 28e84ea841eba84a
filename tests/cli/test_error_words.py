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


def test_an_unreachable_remote_names_the_offline_variable_only_when_it_is_the_cause():
    from vbstore.errors import RemoteOffline

    s3 = RemoteOffline("s3", "127.0.0.1:9 is unreachable (no answer a moment ago)")
    assert "OFFLINE" not in str(s3)
    assert "check the network and the remote's URL" in s3.hint
    assert RemoteOffline("hub", "HF_HUB_OFFLINE is set").hint.startswith("unset HF_HUB_OFFLINE")
    declared = RemoteOffline("s3", "offline (VBSTORE_OFFLINE=1)")
    assert declared.hint.startswith("unset VBSTORE_OFFLINE")


def test_sweep_weights_says_where_weights_go(tmp_path):
    from click.testing import CliRunner

    from vbstore.cli import cli

    backbones = tmp_path / "backbones.txt"
    backbones.write_text("test_cnn\n")
    out = CliRunner().invoke(cli, ["--store", str(tmp_path / "s"), "sweep", "--backbones",
                                   str(backbones), "--tasks", "knn", "-d", "shapes", "--weights",
                                   "random"])
    assert out.exit_code == 2
    assert "sweep takes no --weights: each backbone has its own" in out.output
    assert "'test_cnn weights=random'" in out.output


def test_show_of_a_tensor_hash_shows_its_weights(tmp_path):
    import json

    from click.testing import CliRunner

    from vbstore import Store
    from vbstore.cli import cli
    from vbstore.engine import resolve_backbone

    root = tmp_path / "s"
    with Store(root) as store:
        ref = resolve_backbone(store, "test_cnn", weights="random")
        weights = ref.doc["weights"]
        tensor_hash = store.read_json(weights)["tensor_hash"]
    out = CliRunner().invoke(cli, ["--store", str(root), "show", tensor_hash[:12], "--json"])
    assert out.exit_code == 0, out.output
    shown = json.loads(out.stdout)
    assert shown["id"] == weights
    assert shown["note"].startswith(f"{tensor_hash[:12]} is the tensor hash of weights")


def test_a_task_parameter_spelled_as_a_flag_is_named_as_one(tmp_path):
    from click.testing import CliRunner

    from vbstore.cli import cli

    out = CliRunner().invoke(cli, ["--store", str(tmp_path), "get", "result", "-b", "test_cnn",
                                   "-t", "semantic_segmentation", "--num-classes", "3"])
    assert out.exit_code == 2
    assert "num_classes is a task parameter" in out.output
    assert "-p num_classes=VALUE" in out.output
    assert "--classes" not in out.output  # click's look-alike suggestion is gone
    # a flag that is nobody's parameter keeps click's own words
    other = CliRunner().invoke(cli, ["--store", str(tmp_path), "get", "result", "--bogus"])
    assert other.exit_code == 2
    assert "No such option '--bogus'" in other.output
