"""The target kinds' registry: one declaration per kind, which every reader looks up."""

from __future__ import annotations

import pytest

from vbstore.data import (
    TargetKind,
    describe_kind,
    get_target_kind,
    list_target_kinds,
    register_target_kind,
    target_kind,
)
from vbstore.data import _kinds as kinds_module
from vbstore.errors import UsageError


@pytest.fixture
def sandbox(monkeypatch):
    """Registrations made in a test go away after it."""
    list_target_kinds()  # the built-ins first
    monkeypatch.setattr(kinds_module, "_KINDS", dict(kinds_module._KINDS))


def test_folder_names_map_to_their_kinds():
    assert target_kind("depth_zbuffer") == "depth_map"
    assert target_kind("labels_40") == "label_map"  # NYUv2's prefix
    assert target_kind("Normals") == "normal_map"  # case-insensitive
    assert target_kind("none") is None
    assert target_kind("my_own_folder") is None  # not judged


def test_each_kind_declares_what_its_readers_need():
    for name in list_target_kinds():
        kind = get_target_kind(name)
        assert kind.description
        assert kind.layout
        assert (kind.read is not None) == kind.per_pixel, name
    assert get_target_kind("multi_hot").reads("class_index")
    assert get_target_kind("image").reads("depth_map")  # from the pixels: any data
    assert not get_target_kind("depth_map").reads("label_map")
    assert describe_kind("pairs") == "image pairs"


def test_an_unknown_kind_is_named_with_the_known_ones():
    with pytest.raises(UsageError, match="unknown target kind 'depht_map'"):
        get_target_kind("depht_map")


@pytest.mark.usefixtures("sandbox")
def test_a_new_kind_registers_and_claims_its_folders():
    register_target_kind(TargetKind("saliency_map", "saliency maps", "root/<split>/{images,"
                                    "saliency}", folders=("saliency",), per_pixel=True,
                                    read=lambda reader, position: None))
    assert target_kind("saliency") == "saliency_map"
    with pytest.raises(UsageError, match="already registered"):
        register_target_kind(TargetKind("saliency_map", "x", "y"))
    with pytest.raises(UsageError, match="already means depth_map"):
        register_target_kind(TargetKind("other", "x", "y", folders=("depth",)))
    with pytest.raises(UsageError, match="declares no read"):
        register_target_kind(TargetKind("flat", "x", "y", per_pixel=True))
