"""Bare VisBench names and the model listing, checked against the installed libraries."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from vbstore.backbones import (
    BARE_NAMES,
    InvalidSpec,
    WeightsUnavailable,
    build_backbone,
    catalog_rows,
    model_rows,
    parse_spec,
    register_backbone,
    spec_params,
)
from vbstore.backbones._registry import unregister_backbone
from vbstore.cli import cli


@pytest.mark.parametrize("name", sorted(BARE_NAMES))
def test_a_bare_name_is_its_pinned_spec(name):
    spec = BARE_NAMES[name]
    assert parse_spec(name) == parse_spec(spec)
    # one alias key: the bare name and its spec are one backbone with one cache
    assert spec_params(name, weights="random") == spec_params(spec, weights="random")


def test_bare_specs_exist_in_the_installed_libraries():
    import open_clip
    import timm

    from vbstore.backbones._builtins import DINOV2_CATALOG

    timm_models = set(timm.list_pretrained())
    clip_models = {f"{arch}@{tag}" for arch, tag in open_clip.list_pretrained()}
    for name, spec in BARE_NAMES.items():
        source, _, rest = spec.partition(":")
        known = {"timm": timm_models, "open_clip": clip_models, "dinov2": set(DINOV2_CATALOG)}
        assert rest in known[source], f"{name} -> {spec} is not offered by the installed {source}"


def test_visbench_names_resolve_as_visbench_loads_them():
    assert str(parse_spec("resnet18")) == "timm:resnet18.a1_in1k"
    assert str(parse_spec("dinov2_vits14")) == "dinov2:dinov2_vits14"
    assert str(parse_spec("clip_vitb16")) == "open_clip:ViT-B-16-quickgelu@openai"


def test_a_bare_name_takes_no_tag_and_a_plugin_wins():
    with pytest.raises(InvalidSpec, match=r"stands for timm:resnet18\.a1_in1k"):
        parse_spec("resnet18@tv_in1k")

    def resnet18(*, pretrained=False, input_size=None):
        raise AssertionError("not built here")

    register_backbone(resnet18)
    try:
        assert parse_spec("resnet18").source == "custom"
    finally:
        unregister_backbone("resnet18")


def test_a_bare_name_offline_fails_at_once_naming_its_spec(monkeypatch):
    monkeypatch.setenv("VBSTORE_OFFLINE", "1")
    with pytest.raises(WeightsUnavailable, match=r"timm:resnet18\.a1_in1k") as caught:
        build_backbone("resnet18")
    assert "--weights" in str(caught.value)


def test_model_rows_are_the_libraries_own_lists():
    import open_clip
    import timm
    import torchvision.models as tvm

    specs = {row["spec"] for row in model_rows("resnet50*")}
    expected = {f"timm:{n}" for n in timm.list_pretrained("resnet50*")}
    expected |= {f"torchvision:resnet50@{w.name}" for w in tvm.get_model_weights("resnet50")}
    assert specs == expected
    clip = [row for row in model_rows("vit-b-32*") if row["source"] == "open_clip"]
    assert {(r["arch"], r["tag"]) for r in clip} == {
        (a, t) for a, t in open_clip.list_pretrained() if a.lower().startswith("vit-b-32")}
    assert all(r["installed"] and r["extra"] == "clip" for r in clip)


def test_a_missing_extra_is_marked(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "open_clip" else real(name, *a))
    rows = [r for r in model_rows("open_clip*") if r["source"] == "open_clip"]
    assert len(rows) == 1
    assert rows[0]["installed"] is False
    assert rows[0]["extra"] == "clip"


def test_listing_without_a_pattern_imports_no_torch():
    code = ("import sys; from vbstore.backbones import catalog_rows; rows = catalog_rows('*'); "
            "print(len(rows), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    count, torch_loaded = out.stdout.split()
    assert int(count) >= len(BARE_NAMES)
    assert torch_loaded == "False"


def test_cli_lists_bare_names_and_models():
    runner = CliRunner()
    rows = json.loads(runner.invoke(cli, ["list", "backbones", "resnet18*", "--json"]).output)
    by_spec = {row["spec"]: row for row in rows}
    assert by_spec["resnet18"]["stands_for"] == "timm:resnet18.a1_in1k"
    assert "timm:resnet18.a1_in1k" in by_spec
    assert "torchvision:resnet18@IMAGENET1K_V1" in by_spec
    plain = json.loads(runner.invoke(cli, ["list", "backbones", "--json"]).output)
    assert not any(row["spec"].startswith("timm:resnet") for row in plain)
    assert rows == json.loads(runner.invoke(
        cli, ["list", "backbones", "resnet18*", "--models", "--json"]).output)
    assert catalog_rows("resnet18*") == [r for r in rows if "stands_for" in r]
