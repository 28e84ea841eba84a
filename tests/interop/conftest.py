"""CLIP_benchmark 1.6.2 as a yardstick: installed once per test run (tests/conftest.py's
``peers_site``, which the conformance tier shares), never imported by vbstore.

``VBSTORE_PEERS_SITE`` may name the folders (``os.pathsep``-separated) that already hold it;
otherwise pip installs it and VisBench 0.27.0, without their dependencies (torch, open_clip,
sklearn, pycocotools and pycocoevalcap, which its command line imports, come with the test
extras), into a temp folder.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def clip_benchmark_site(request) -> list[Path]:
    """Folders that hold ``clip_benchmark`` 1.6.2 (pycocoevalcap comes with the test extras)."""
    given = os.environ.get("VBSTORE_PEERS_SITE")
    if given:
        return [Path(p) for p in given.split(os.pathsep) if p]
    return [request.getfixturevalue("peers_site")]


@pytest.fixture
def clip_benchmark(clip_benchmark_site, monkeypatch):
    """The ``clip_benchmark`` package, importable for this test only."""
    for site in reversed(clip_benchmark_site):
        monkeypatch.syspath_prepend(str(site))
    for name in [m for m in sys.modules if m.split(".")[0] == "clip_benchmark"]:
        monkeypatch.delitem(sys.modules, name)
    module = importlib.import_module("clip_benchmark")
    assert module.__file__ is not None
    assert any(Path(module.__file__).is_relative_to(site) for site in clip_benchmark_site)
    return module


@pytest.fixture(scope="module")
def shapes(shapes_folder):
    """A small shapes dataset (train and val splits) as image folders."""
    return shapes_folder(4, 1)
