"""Fixtures shared by the whole suite: every test gets its own store and caches."""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import settings

# Tiny tensors: torch's intra-op thread pool only costs time here. On a 2-core machine shared
# with other jobs, a 20-sample head's 200 epochs spent seconds synchronising threads (the fast
# tier's three slowest files: 92 s with torch's default, 38 s with one thread). Set before torch
# loads; the subprocesses tests start inherit it; a run that wants more threads sets it itself.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# No timing in pass/fail tests: hypothesis's per-example deadline (200 ms) failed
# test_put_get_round_trip_and_equal_content_equal_id at 528 ms on a loaded machine
settings.register_profile("vbstore", deadline=None)
settings.load_profile("vbstore")


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


@pytest.fixture
def thread_submits(monkeypatch):
    """The calls made to ``ThreadPoolExecutor.submit`` while the test runs (a list that grows by
    one per call; each call still submits): what a task costs in futures and their locks."""
    from concurrent.futures import ThreadPoolExecutor

    submitted: list[int] = []
    real = ThreadPoolExecutor.submit

    def submit(self, fn, *args, **kwargs):
        submitted.append(1)
        return real(self, fn, *args, **kwargs)

    monkeypatch.setattr(ThreadPoolExecutor, "submit", submit)
    return submitted


@pytest.fixture(scope="session")
def generated(tmp_path_factory):
    """``generated(kind, **params)``: a generated data folder (``"shapes"`` or ``"scenes"``,
    32 px unless ``size=`` says otherwise), written once per test session and parameters and
    shared by every test that asks for the same ones: read it, never write into it (a test that
    changes its data copies the folder first, ``shutil.copytree``). The folder is named after its
    kind (``.../shapes``), as a user's would be."""
    from vbstore.data import make_scenes, make_shapes

    makers = {"shapes": make_shapes, "scenes": make_scenes}
    made: dict[tuple, str] = {}

    def make(kind: str, *, size: int = 32, **params) -> str:
        key = (kind, size, tuple(sorted(params.items())))
        if key not in made:
            folder = tmp_path_factory.mktemp(f"data-{kind}") / kind
            made[key] = str(makers[kind](folder, size=size, **params))
        return made[key]

    return make


@pytest.fixture(scope="session")
def shapes_folder(generated):
    """``shapes_folder(per_class, seed)``: the generated `shapes` folder (train and val splits of
    five classes, ``per_class`` images each, 32 px) of :func:`generated`, shared, read only; a
    folder's `shapes` fixture says how many."""
    return lambda per_class, seed: generated("shapes", per_class=per_class, seed=seed)


# `make test`'s serial pass collects only the test files that spell this (grep), not the suite
SERIAL_MARK = "mark.serial"


@pytest.hookimpl(tryfirst=True)  # before -m deselects: every item is seen here
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``make test``), the costliest files first, each file's own order
    kept: ``--dist loadfile --no-loadscope-reorder`` hands whole files out in this order, so the
    long files start at once and the short ones fill in around them, rather than a long file
    starting last and running alone. A file's cost is its slow cases, each counted once or, where
    one is marked ``slow(cost=N)``, N times. A run in one process keeps pytest's order.

    A test marked ``serial`` in a file that does not spell ``mark.serial`` (the Makefile's serial
    pass would never collect it, and the parallel pass leaves it out) stops the run."""
    hidden = sorted({str(item.path) for item in items if item.get_closest_marker("serial")
                     and SERIAL_MARK not in item.path.read_text(encoding="utf-8")})
    if hidden:
        raise pytest.UsageError(f"marked serial, but the file never spells {SERIAL_MARK!r} "
                                f"(make test's serial pass finds its files by it): {hidden}")
    if not hasattr(config, "workerinput"):
        return
    cost: Counter = Counter()
    for item in items:
        mark = item.get_closest_marker("slow")
        if mark is not None:
            cost[item.path] += mark.kwargs.get("cost", 1)
    items.sort(key=lambda item: -cost[item.path])  # stable: a file's items stay together


# The Ray cluster tests run only inside a loopback-only network namespace; outside, the runner
# tests/engine/test_executor.py::test_ray_suite_in_loopback_namespace starts them there.
collect_ignore = [] if os.environ.get("VBSTORE_RAY_NETNS") else ["ray_cluster"]


def _conformance_harness():
    """benchmarks/conformance.py, loaded by path (benchmarks/ is no package)."""
    import importlib.util

    name = "vbstore_conformance"
    if name in sys.modules:
        return sys.modules[name]
    harness_path = Path(__file__).resolve().parents[1] / "benchmarks" / "conformance.py"
    spec = importlib.util.spec_from_file_location(name, harness_path)
    assert spec is not None
    assert spec.loader is not None
    harness = importlib.util.module_from_spec(spec)
    sys.modules[name] = harness  # its dataclasses look their module up by name
    spec.loader.exec_module(harness)
    return harness


@pytest.fixture(scope="session")
def peers_site(tmp_path_factory):
    """A folder holding both peers, VisBench 0.27.0 and CLIP_benchmark 1.6.2 (``PYTHONPATH``
    for a peer process, or ``sys.path`` for a test that imports CLIP_benchmark's builders; never
    imported by vbstore): ``VBSTORE_CONFORMANCE_PEERS``, else installed as the conformance tier
    installs them (``pip install --no-deps --target``, benchmarks/conformance.py), once per run:
    under pytest-xdist (make test) the folder above a worker's basetemp is the run's own; the
    first worker installs, the others wait and read it."""
    given = os.environ.get("VBSTORE_CONFORMANCE_PEERS")
    if given:
        return Path(given)
    harness = _conformance_harness()
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        target = tmp_path_factory.mktemp("peers")
        harness.install_peers(target)
        return target
    import fcntl

    shared = tmp_path_factory.getbasetemp().parent / "peers"
    with open(f"{shared}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not shared.is_dir():
            target = tmp_path_factory.mktemp("peers")
            harness.install_peers(target)
            target.rename(shared)
    return shared


@pytest.fixture(scope="session")
def visbench_site(peers_site):
    """A folder holding VisBench 0.27.0 (``PYTHONPATH`` for a VisBench process): the run's
    :func:`peers_site`."""
    return peers_site
