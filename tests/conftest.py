"""Fixtures shared by the whole suite: every test gets its own store and caches."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Tiny tensors: torch's intra-op thread pool only costs time here. On a 2-core machine shared
# with other jobs, a 20-sample head's 200 epochs spent seconds synchronising threads (the fast
# tier's three slowest files: 92 s with torch's default, 38 s with one thread). Set before torch
# loads; the subprocesses tests start inherit it; a run that wants more threads sets it itself.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory, monkeypatch):
    """Point VBSTORE_HOME, HF_HOME, TORCH_HOME and friends at fresh temp dirs."""
    home = tmp_path_factory.mktemp("env")
    for name, sub in [("VBSTORE_HOME", "store"), ("HF_HOME", "hf"), ("TORCH_HOME", "torch"),
                      ("XDG_CACHE_HOME", "cache")]:
        monkeypatch.setenv(name, str(home / sub))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.delenv("VBSTORE_DEBUG", raising=False)
    # progress lines come every N seconds of a step: on a loaded machine a slow step would add
    # one to a command's output; tests that read them set the interval (tests/test_progress.py)
    monkeypatch.setenv("VBSTORE_PROGRESS_INTERVAL", "3600")
    monkeypatch.delenv("VBSTORE_PROGRESS", raising=False)
    return home


@pytest.fixture
def store(tmp_path):
    from vbstore import Store

    with Store(tmp_path / "store") as s:
        yield s


@pytest.fixture(scope="session")
def shapes_folder(tmp_path_factory):
    """``shapes_folder(per_class, seed)``: a fresh generated `shapes` folder (train and val
    splits of five classes, ``per_class`` images each, 32 px); a folder's `shapes` fixture says
    how many."""
    from vbstore.data import make_shapes

    def make(per_class: int, seed: int) -> str:
        folder = tmp_path_factory.mktemp("data") / "shapes"
        return str(make_shapes(folder, per_class=per_class, seed=seed, size=32))

    return make


# The Ray cluster tests run only inside a loopback-only network namespace; outside, the runner
# tests/engine/test_executor.py::test_ray_suite_in_loopback_namespace starts them there.
collect_ignore = [] if os.environ.get("VBSTORE_RAY_NETNS") else ["ray_cluster"]


@pytest.fixture(scope="session")
def visbench_site(tmp_path_factory):
    """A folder holding VisBench 0.27.0 (``PYTHONPATH`` for a peer process; never imported
    here): ``VBSTORE_CONFORMANCE_PEERS``, else installed as the conformance tier installs its
    peers (``pip install --no-deps --target``, benchmarks/conformance.py)."""
    given = os.environ.get("VBSTORE_CONFORMANCE_PEERS")
    if given:
        return Path(given)
    import importlib.util

    harness_path = Path(__file__).resolve().parents[1] / "benchmarks" / "conformance.py"
    spec = importlib.util.spec_from_file_location("vbstore_conformance_peers", harness_path)
    assert spec is not None
    assert spec.loader is not None
    harness = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = harness  # its dataclasses look their module up by name
    spec.loader.exec_module(harness)
    target = tmp_path_factory.mktemp("visbench")
    harness.install_peers(target, ("visbench==0.27.0",))
    return target
