"""Hypothesis fuzzing of what a remote hands back: any bytes as a ref or derivation record are
either accepted as a checked closure or refused with a vbstore error, never a traceback."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vbstore.errors import VbstoreError
from vbstore.remotes._closure import parse_derivation, parse_ref

HEX = st.text("0123456789abcdef", min_size=64, max_size=64)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20) | HEX,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                               max_size=4),
    max_leaves=30,
)
ENTRY = st.fixed_dictionaries({"id": HEX | JSONISH, "kind": st.sampled_from(
    ["head", "pack", "result", "nope", 3]), "size": st.integers(-2, 1 << 40) | JSONISH,
    "edges": st.lists(st.lists(st.text(max_size=8) | HEX, max_size=3), max_size=3) | JSONISH,
    "derivation": st.none() | JSONISH})
REF = st.fixed_dictionaries({"format": st.just("vbstore.ref/1") | st.text(max_size=5),
                             "name": st.just("r") | JSONISH, "id": HEX | JSONISH,
                             "kind": st.sampled_from(["head", "pack"]) | JSONISH,
                             "closure": st.lists(ENTRY, max_size=4) | JSONISH})
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _refused_or_checked(parse, *args) -> None:
    try:
        parse(*args)
    except VbstoreError:
        pass


@FUZZ
@given(st.binary(max_size=300))
def test_any_bytes_as_a_ref_are_refused_cleanly(data):
    _refused_or_checked(parse_ref, "r", "r", data)
    _refused_or_checked(parse_derivation, "r", "0" * 64, data)


@FUZZ
@given(REF)
def test_any_ref_shaped_document_is_checked_or_refused(doc):
    _refused_or_checked(parse_ref, "r", "r", json.dumps(doc).encode())


@FUZZ
@given(st.integers(1, 5000))
def test_deep_nesting_is_refused_cleanly(depth):
    _refused_or_checked(parse_ref, "r", "r", b"[" * depth + b"]" * depth)
    _refused_or_checked(parse_ref, "r", "r", b'{"format":' * depth + b"1" + b"}" * depth)
