"""Sharing heads from the Python API (issue 32): ``vbstore.push_head``/``pull_head`` carry the
command line's checks, and a plain ``vbstore.remotes.pull`` never names a head unchecked."""

from __future__ import annotations

import numpy as np
import pytest

import vbstore
from vbstore import Store, canonical
from vbstore.engine import resolve_backbone
from vbstore.errors import HeadMismatch, UsageError
from vbstore.remotes import add_remote, push
from vbstore.remotes import pull as plain_pull

SPEC = dict(weights="random", input_size=32)


@pytest.fixture(scope="module")
def shapes(shapes_folder):
    return shapes_folder(4, 0)


@pytest.fixture
def stores(tmp_path, shapes):
    """Store a with a trained head ``my-head``, store b, both sharing directory remote team."""
    a, b = Store(tmp_path / "a"), Store(tmp_path / "b")
    for store in (a, b):
        add_remote(store, "team", str(tmp_path / "team"))
    head = vbstore.get_head("test_cnn", "classification", shapes, train_split="train", store=a,
                            progress=False, **SPEC)
    a.tag("my-head", head.id)
    yield a, b, head.id
    a.close()
    b.close()


def test_push_head_and_pull_head_share_a_head_from_the_api(stores):
    a, b, head = stores
    pushed = vbstore.push_head(a, "my-head", "team")
    assert (pushed.head, pushed.not_here) == (head, [])
    mine = resolve_backbone(b, "test_cnn", seed=None, **SPEC)
    pulled = vbstore.pull_head(b, "team/my-head", backbone=mine.id)
    assert (pulled.id, pulled.mismatch) == (head, [])
    assert b.refs()["my-head"] == head


def test_pull_head_refuses_a_head_for_other_weights_and_names_nothing(stores):
    a, b, _ = stores
    vbstore.push_head(a, "my-head", "team")
    other = resolve_backbone(b, "test_cnn", seed=1, **SPEC)
    with pytest.raises(HeadMismatch, match="weights"):
        vbstore.pull_head(b, "team/my-head", backbone=other.id)
    assert "my-head" not in b.refs()
    loose = vbstore.pull_head(b, "team/my-head", backbone=other.id, strict=False)
    assert loose.mismatch
    assert b.refs()["my-head"] == loose.id


def test_push_head_refuses_what_the_command_refuses(stores):
    a, _, head = stores
    with pytest.raises(UsageError, match="by name"):
        vbstore.push_head(a, head, "team")
    with pytest.raises(UsageError, match="model card"):
        vbstore.push_head(a, "my-head", "team", metrics_from="anything")


def test_a_plain_pull_never_names_a_head_without_its_compatibility_check(tmp_path):
    """The issue: the API's pull installed a head with no compatibility check (the check was a
    closure in the CLI). A head lacking a required field is refused, and names nothing."""
    a, b = Store(tmp_path / "a"), Store(tmp_path / "b")
    for store in (a, b):
        add_remote(store, "d", str(tmp_path / "d"))
    compat = {"backbone": "b" * 64, "weights": "a" * 64, "extractor_key": "e" * 64,
              "layers": [-1], "feature_mode": "pooled", "embed_dim": 4, "task": "linear",
              "task_op_version": 1}  # no pooling
    head = a.put_tensors({"weight": np.ones((3, 4), np.float32)}, "head",
                         {"format": "vbstore.head.v1",
                          "vbstore.compat": canonical.dumps(compat).decode()})
    a.tag("heads/partial", head)
    push(a, "d", "heads/partial")
    with pytest.raises(HeadMismatch, match="pooling"):
        plain_pull(b, "d/heads/partial")
    assert b.refs() == {}


def test_a_head_whose_named_backbone_gives_other_weights_is_refused_at_the_gate(stores,
                                                                                 tmp_path):
    """The gate's head check, on every path in: a record naming a backbone (here, with it)
    whose weights are not the ones the record says it was trained on contradicts the store."""
    from safetensors.torch import load

    from vbstore.heads import export_head, head_record, import_head, save_head
    from vbstore.remotes import TamperedBlob

    a, b, head = stores
    record = {**head_record(a, head), "weights": "f" * 64}
    forged = save_head(a, load(a.read_bytes(head)), record)
    export_head(a, forged, tmp_path / "forged.safetensors")
    with pytest.raises(HeadMismatch, match="whose weights are not"):
        import_head(a, tmp_path / "forged.safetensors", name="forged")
    a.tag("heads/forged", forged)
    vbstore.push_head(a, "heads/forged", "team")
    with pytest.raises(TamperedBlob, match="whose weights are not"):
        plain_pull(b, "team/heads/forged")
    assert not b.has(forged)
