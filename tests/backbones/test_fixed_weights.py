"""``fixed`` weights: set by construction, recorded as such and never as ``pretrained``.

``test_pixels`` is the built-in case (a hand-set filter bank). The golden values pin that adding
the origin moved no other identity: the random-weight test backbones' weights, backbone and
alias ids are what they were before ``fixed`` existed (computed on the commit before it).
"""

from __future__ import annotations

import pytest
import torch

from vbstore import canonical
from vbstore.backbones import build_backbone, get_entry, register_backbone, spec_params
from vbstore.backbones._weights import parse_weights, weights_record
from vbstore.engine import resolve_backbone
from vbstore.errors import UsageError
from vbstore.store import derivation_key, derivation_spec

H = "ab" * 32


def test_test_pixels_default_weights_are_recorded_as_fixed():
    entry = get_entry("test_pixels")
    assert entry.weights_origin == "fixed"
    record = build_backbone("test_pixels", input_size=16).weights_record()
    assert record["origin"] == "fixed"
    # the filters are still named and pinned: what they are, and which version of them
    assert record["upstream"].startswith("vbstore:test_pixels (fixed filters, nothing learned")
    assert record["revision"] == "1"
    assert record["seed"] is None
    assert spec_params("test_pixels")["weights"] == "fixed"


def test_test_pixels_random_weights_stay_random():
    record = build_backbone("test_pixels", weights="random", seed=2, input_size=16).weights_record()
    assert (record["origin"], record["seed"], record["upstream"]) == ("random", 2, None)
    assert spec_params("test_pixels", weights="random")["weights"] == "random"


def test_a_plugin_declares_fixed_default_weights(plugin, store):
    def my_edges(*, pretrained=False, input_size=None):
        module = torch.nn.Conv2d(3, 2, 3, bias=False)
        if pretrained:
            with torch.no_grad():
                module.weight.copy_(torch.tensor([[[[-1.0, 0.0, 1.0]] * 3] * 3] * 2))
        return module

    plugin(my_edges, pretrained=True, weights_origin="fixed", upstream="my edge filters",
           revision="3", embed_dim=2)
    built = build_backbone("my_edges", input_size=16)
    assert built.weights_record()["origin"] == "fixed"
    assert built.weights_record()["upstream"] == "my edge filters"
    stored = resolve_backbone(store, "my_edges", input_size=16)
    assert stored.weights_origin == "fixed"  # the stored weights record passes its schema
    # random and checkpoint weights of the same plugin are what they always were
    assert build_backbone("my_edges", weights="random").weights_record()["origin"] == "random"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"pretrained": True, "weights_origin": "handmade"}, "weights_origin must be one of"),
        ({"weights_origin": "fixed"}, r"has none \(pretrained=False\)"),
        ({"prefix": True, "pretrained": True, "weights_origin": "fixed"}, "is for plugins"),
    ],
)
def test_an_invalid_fixed_declaration_is_a_one_line_usage_error(kwargs, match):
    def my_bad_filters(*, pretrained=False, input_size=None):
        return torch.nn.Conv2d(3, 2, 3)

    with pytest.raises(UsageError, match=match) as info:
        register_backbone(**kwargs)(my_bad_filters)
    assert "\n" not in str(info.value)
    assert info.value.exit_code == 2
    with pytest.raises(KeyError):  # refused: nothing was registered
        get_entry("my_bad_filters")


def test_weights_record_bytes_for_other_origins_are_unchanged():
    """A record that is not ``fixed`` is byte for byte what it was before ``fixed`` existed."""
    random = weights_record(parse_weights("random", seed=3), H)
    assert canonical.dumps(random.to_dict()) == (
        b'{"origin":"random","path":null,"revision":null,"seed":3,"tensor_hash":"' + H.encode()
        + b'","upstream":null}'
    )
    pinned = weights_record(parse_weights("default"), H, upstream="hf://timm/x", revision="r1")
    assert canonical.dumps(pinned.to_dict()) == (
        b'{"origin":"pretrained","path":null,"revision":"r1","seed":null,"tensor_hash":"'
        + H.encode() + b'","upstream":"hf://timm/x"}'
    )


# Ids computed on the commit before ``fixed`` (1202dcb): test_vit and test_cnn with random
# weights (seed 0, their default input size). A change here re-keys every store's results with
# them. They also rest on torch's seeded init of these modules being stable.
GOLDEN = {
    "test_vit": (
        "eff861f1e3bea770ea93c932d78935c1d8ecd54ef2b68678269dd32bb73eda90",
        "7589fa49fb51044f08fd2e52f4c29d74adfd69a645374d1f5a1ea38026abf687",
        "a9f30656cceec0ccde4115d73bf50f4f25bea46e2fa6820622d6b333ebe683e0",
    ),
    "test_cnn": (
        "20591ae85b78a6245e3b97f90613750a41ad5cb9eeed004167c7b3f0ad44e506",
        "ad08a9d15cf6903ef5e02b1bee4e6fa19cebd4a4a0ef8749166481ef4514e4f1",
        "8172f0a3fa60d50bddfa6a98ffcb1909b8a4e2af16f90791d5f9570190814cbe",
    ),
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_random_test_backbone_ids_did_not_move(store, name):
    weights, backbone, alias = GOLDEN[name]
    ref = resolve_backbone(store, name, weights="random")
    assert ref.doc["weights"] == weights
    assert ref.id == backbone
    params = spec_params(name, weights="random")
    assert derivation_key(derivation_spec("backbone", 1, {}, params)) == alias
    assert store.lookup(alias) == backbone  # the engine recorded that alias


def test_one_weights_record_writes_and_reads_the_same_document():
    """The record a backbone writes is the record readers read: one class, and its document
    (explicit nulls included) reads back to an equal record and the same bytes."""
    from vbstore import backbones, records

    assert backbones.WeightsRecord is records.WeightsRecord
    written = weights_record(parse_weights("random", seed=3), H)
    doc = {**written.to_dict(), "kind": "weights"}  # as the store keeps it
    read = records.WeightsRecord.from_dict(doc)
    assert (read.origin, read.seed, read.upstream) == ("random", 3, None)
    assert canonical.dumps(read.to_dict()) == canonical.dumps(doc)
    assert records.WeightsRecord.from_dict(written.to_dict()) == written
