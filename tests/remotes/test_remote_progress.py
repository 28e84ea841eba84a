"""Pushes and pulls on every kind of remote say how far they are: plain lines on stderr when it
is not a terminal (``VBSTORE_PROGRESS_INTERVAL=0``: a line after every unit)."""

from __future__ import annotations

import re

import pytest

from vbstore._progress import reporting
from vbstore.remotes import add_remote, pull, push


@pytest.fixture
def lines(monkeypatch, capsys):
    monkeypatch.setenv("VBSTORE_PROGRESS_INTERVAL", "0")
    monkeypatch.delenv("VBSTORE_PROGRESS", raising=False)
    capsys.readouterr()
    return lambda: [re.sub(r" \(\d+ s\)$", "", x) for x in capsys.readouterr().err.splitlines()]


def _round_trip(stores, name: str, lines) -> tuple[list[str], list[str], int, int]:
    a, b = stores
    with reporting(True):
        sent = push(a, name, "exp/result")
        pushed = lines()
        got = pull(b, f"{name}/exp/result")
        pulled = lines()
    assert len(got.downloaded) == len(sent.uploaded)
    return pushed, pulled, len(sent.uploaded), sent.derivations


def test_an_s3_push_and_pull_write_their_lines(stores, lineage, s3_url, lines):
    url, endpoint = s3_url
    for store in stores:
        add_remote(store, "s3", url, {"endpoint_url": endpoint})
    pushed, pulled, n, derivations = _round_trip(stores, "s3", lines)
    files = n + derivations  # the objects and their derivation records
    assert pushed == [f"pushing to s3: file {files}/{files}"]  # one batch
    assert pulled == [f"pulling from s3: blob {i}/{n}" for i in range(1, n + 1)]


def test_a_hub_push_and_pull_write_their_lines(stores, lineage, hub, lines):
    for store in stores:
        add_remote(store, "hub", "hf://tester/progress", cache=True)
    pushed, pulled, n, derivations = _round_trip(stores, "hub", lines)
    files = n + derivations + 1  # the objects, their derivation records, the ref: one commit
    assert pushed == [f"pushing to hub: file {files}/{files}"]
    assert pulled == [f"pulling from hub: blob {i}/{n}" for i in range(1, n + 1)]


def test_no_lines_when_reporting_is_off(stores, lineage, s3_url, lines):
    url, endpoint = s3_url
    add_remote(stores[0], "s3", url, {"endpoint_url": endpoint})
    push(stores[0], "s3", "exp/result")
    assert lines() == []
