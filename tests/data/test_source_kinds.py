"""A data source kind registers once (``register_source_kind``): its prefix is then data, its
options are checked, and its reader lists a split; the built-ins are four such kinds."""

from __future__ import annotations

from pathlib import Path

import pytest

from vbstore.data import SourceKind, _source_kinds, list_split, register_source_kind, source_kinds
from vbstore.data._packaged import parse_source
from vbstore.data._sources import Source
from vbstore.errors import UsageError


@pytest.fixture
def sandbox(monkeypatch):
    source_kinds()  # the built-ins first
    monkeypatch.setattr(_source_kinds, "_KINDS", dict(_source_kinds._KINDS))


def test_the_built_in_sources_are_registered_kinds():
    assert source_kinds() == ("hf", "torchvision", "wds", "cb")
    assert parse_source("hf:cifar10") == ("hf", "cifar10")
    with pytest.raises(UsageError, match="wds: data takes no image_column option"):
        _source_kinds.check_source_options("wds", {"image_column": "img"})


@pytest.mark.usefixtures("sandbox")
def test_a_new_source_kind_is_data_once_registered(store, shapes_folder):
    root = Path(shapes_folder(2, 0)) / "val"
    opened = []

    def open_toy(store, rest, split, options):
        opened.append((rest, split, dict(options)))
        rows = ["image,label"] + [f"{p.parent.name}/{p.name},{p.parent.name}"
                                  for p in sorted(root.glob("*/*.png"))]
        listing = root / "toy.csv"
        listing.write_text("\n".join(rows) + "\n")
        return Source(listing, None, {"kind": "toy", "name": rest})

    with pytest.raises(UsageError, match="unknown data source 'toy:'"):
        parse_source("toy:anything")
    register_source_kind(SourceKind("toy", ("download",), open_toy))
    assert parse_source("toy:anything") == ("toy", "anything")
    listing = list_split(store, "toy:anything", split="val", download=True)
    assert opened == [("anything", "val", {"download": True})]
    assert len(listing.scan.entries) == len(list(root.glob("*/*.png")))
    with pytest.raises(UsageError, match="toy: data takes no dataset_root option"):
        list_split(store, "toy:anything", split="val", dataset_root=str(root))
    with pytest.raises(UsageError, match="already registered"):
        register_source_kind(SourceKind("toy", (), open_toy))
    with pytest.raises(UsageError, match="unknown options nope"):
        register_source_kind(SourceKind("toy2", ("nope",), open_toy))
