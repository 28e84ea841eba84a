"""Hypothesis fuzzing of the CSV and JSONL sample-list readers: any file is either a scan of
samples or one short line of BadInput / UsageError, never a traceback."""

from __future__ import annotations

import csv
import io
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vbstore.data._lists import COLUMNS, scan_list
from vbstore.errors import BadInput, UsageError

FUZZ = settings(max_examples=120, deadline=None,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])
TEXT = st.text(max_size=12) | st.sampled_from(["img/0.jpg", "../x.jpg", "/abs.jpg", "C:/x",
                                               "a;b", "[", "[]", '["a"]', " ", "", "\n", "0"])
NESTS = st.sampled_from([2, 9, 40, 1500, 100_000])
DEEP = NESTS.map(lambda n: "[" * n + "]" * n)
LONG = st.integers(100_000, 140_000).map(lambda n: "x" * n)
SCALAR = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT
VALUE = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(TEXT, inner, max_size=3), max_leaves=12)
KEY = st.sampled_from(COLUMNS) | st.text(max_size=6)
ROW = st.dictionaries(KEY, VALUE | DEEP | LONG, max_size=5)
CLASSES = st.none() | st.lists(st.text(max_size=5), max_size=4)
TARGET_TYPE = st.none() | st.sampled_from(["depth", "class"])


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def _scan_or_refuse(path, classes, target_type) -> None:
    try:
        scan = scan_list(path, "val", classes, target_type)
    except (BadInput, UsageError) as exc:
        message = str(exc)
        assert "\n" not in message, message[:500]
        assert len(message) < 3000, message[:500]
    else:
        assert scan.entries  # an accepted list has samples


@FUZZ
@given(data=st.binary(max_size=400), suffix=st.sampled_from([".csv", ".jsonl"]),
       classes=CLASSES, target_type=TARGET_TYPE)
def test_any_bytes(folder, data, suffix, classes, target_type):
    path = folder / f"list{suffix}"
    path.write_bytes(data)
    _scan_or_refuse(path, classes, target_type)


# a row whose column holds raw nested JSON, not a string of brackets
NESTED_ROW = st.tuples(st.sampled_from(COLUMNS), NESTS).map(
    lambda c: f'{{"image": "img/0.jpg", "{c[0]}": {"[" * c[1] + "]" * c[1]}}}')
LINE = (ROW | VALUE).map(json.dumps) | NESTED_ROW | st.text(max_size=30)


@FUZZ
@given(lines=st.lists(LINE, max_size=5), classes=CLASSES, target_type=TARGET_TYPE)
def test_jsonl_rows(folder, lines, classes, target_type):
    path = folder / "list.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    _scan_or_refuse(path, classes, target_type)


@FUZZ
@given(header=st.lists(KEY, min_size=1, max_size=4),
       cells=st.lists(st.lists(TEXT | DEEP | LONG, max_size=5), max_size=5),
       classes=CLASSES, target_type=TARGET_TYPE)
def test_csv_rows(folder, header, cells, classes, target_type):
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    writer.writerows(cells)
    path = folder / "list.csv"
    path.write_text(out.getvalue())
    _scan_or_refuse(path, classes, target_type)
