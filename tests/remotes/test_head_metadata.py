"""A head's ``__metadata__`` is read through its record (``HeadMetadata``): what is a vbstore
head and what is not, on every path that reads one (stored, imported, arriving)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import save

from vbstore.errors import UsageError
from vbstore.heads._files import _read_record
from vbstore.heads._record import HEAD_FORMAT, head_metadata
from vbstore.records import HeadMetadata

COMPAT = {"task": "linear", "backbone": "b" * 64}


def _header(metadata):
    return {"__metadata__": metadata,
            "weight": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}


def test_a_head_header_reads_as_its_record():
    text = json.dumps(COMPAT)
    metadata = head_metadata(_header({"vbstore.kind": "head", "format": HEAD_FORMAT,
                                      "vbstore.compat": text}))
    assert isinstance(metadata, HeadMetadata)
    assert json.loads(metadata.compat_json) == COMPAT


@pytest.mark.parametrize("metadata", [
    {"format": HEAD_FORMAT},  # no compatibility record
    {"format": "vbstore.pack.v1", "vbstore.compat": "{}"},  # another format
    {"vbstore.compat": "{}"},  # no format
    {},
], ids=["no-record", "other-format", "no-format", "empty"])
def test_what_is_not_a_head_header(metadata):
    assert head_metadata(_header(metadata)) is None
    assert head_metadata({}) is None  # no metadata at all


def _file(metadata):
    return save({"weight": np.zeros(1, dtype=np.float32)}, metadata=metadata)


def test_an_imported_file_is_read_through_the_record(tmp_path):
    path = tmp_path / "head.safetensors"
    good = {"vbstore.kind": "head", "format": HEAD_FORMAT}
    with pytest.raises(UsageError, match="no readable compatibility record"):
        _read_record(_file(good), path)
    with pytest.raises(UsageError, match="no readable compatibility record"):
        _read_record(_file({**good, "vbstore.compat": "{not json"}), path)
    with pytest.raises(UsageError, match="safetensors but not a vbstore head"):
        _read_record(_file({"vbstore.kind": "pack", "format": HEAD_FORMAT,
                            "vbstore.compat": "{}"}), path)
