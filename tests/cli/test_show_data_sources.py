"""`vbstore show REF` takes data from every registered data source kind (``cb:`` was missing
from the CLI's own list) and names packaged and generated data, as the data layer does."""

from __future__ import annotations

from vbstore.cli._showdata import looks_like_data
from vbstore.data import data_prefixes, source_kinds


def test_every_data_source_kind_is_data_to_show():
    for kind in source_kinds():
        assert looks_like_data(f"{kind}:name"), kind
    assert looks_like_data("cb:cifar10")
    assert looks_like_data("shapes")
    assert looks_like_data("sklearn:digits")
    assert not looks_like_data("0123456789ab")  # an object id
    assert set(source_kinds()) <= set(data_prefixes())
