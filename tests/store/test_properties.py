import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vbstore import canonical
from vbstore.canonical import digest
from vbstore.errors import NonCanonical

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: (st.lists(children, max_size=4)
                      | st.dictionaries(st.text(), children, max_size=4)),
    max_leaves=20,
)


@given(json_values)
def test_canonical_round_trip(value):
    encoded = canonical.dumps(value)
    decoded = canonical.loads(encoded)
    assert canonical.dumps(decoded) == encoded
    assert json.loads(encoded) == decoded


@given(st.dictionaries(st.text(), st.integers(), min_size=2, max_size=6))
def test_key_order_does_not_change_the_id(mapping):
    reordered = dict(reversed(list(mapping.items())))
    assert canonical.key_of(mapping) == canonical.key_of(reordered)


@given(st.sampled_from([math.nan, math.inf, -math.inf]))
def test_non_finite_floats_are_refused(value):
    with pytest.raises(NonCanonical) as refused:
        canonical.dumps({"a": [1, {"b": value}]})
    assert refused.value.field == "a[1].b"


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=5000))
def test_put_get_round_trip_and_equal_content_equal_id(store, data):
    first = store.put_bytes(data)
    assert first == digest(data)
    assert store.put_bytes(bytes(data)) == first
    assert store.read_bytes(first, verify=True) == data
