"""vbstore beside VisBench 0.27.0 and CLIP_benchmark 1.6.2 on the same data and weights.

The rows are the slow tier (two cheap checks run in the fast one). The peers are installed once
per test run (tests/conftest.py's ``peers_site``: ``pip install --no-deps --target TMP``; the
package index must be reachable), or read from ``VBSTORE_CONFORMANCE_PEERS`` (a folder holding
both, e.g. one filled by ``benchmarks/conformance.py --install --work DIR``). They run in
their own process, never imported by vbstore or by this test (``benchmarks/conformance_peer.py``).

One row of ``benchmarks/conformance.py``'s :data:`ROWS` is one test: a row expected to agree must
agree, and a known difference is a strict xfail naming the #23 item that fixes it, so a fix
merged without flipping the row (``expect="agree"``) fails here.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[2] / "benchmarks" / "conformance.py"


def _load_harness():
    spec = importlib.util.spec_from_file_location("vbstore_conformance", HARNESS)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


conformance = _load_harness()


# open_clip's smallest built-in CLIP for the CLIP_benchmark rows (the benchmark's default is
# ViT-B-32): the same code on both sides, a fifth of the towers' cost
CLIP_ARCH = "ViT-S-32-alt"


@pytest.fixture(scope="module")
def report(tmp_path_factory, peers_site):
    import torch

    threads = torch.get_num_threads()
    begin = time.perf_counter()
    try:  # one thread: the suite runs a worker per core, and the peer shares the same cores
        out = conformance.compare(peers_site, tmp_path_factory.mktemp("conformance"), seeds=3,
                                  threads=1, clip_arch=CLIP_ARCH)
    finally:  # compare sets torch's threads for its runs: the worker's next files keep one
        torch.set_num_threads(threads)
    print(f"\nconformance: {time.perf_counter() - begin:.0f} s\n{conformance.table(out)}")
    return {(row["probe"], row["ours_key"]): row for row in out["rows"]}


def _params():
    for row in conformance.ROWS:
        marks = () if row.expect == "agree" else pytest.mark.xfail(strict=True, reason=row.expect)
        yield pytest.param(row, id=f"{row.run}-{row.ours}", marks=marks)


@pytest.mark.slow
@pytest.mark.parametrize("row", _params())
def test_row_agrees_with_the_peer(report, row):
    entry = report[(row.run, row.ours)]
    assert entry["status"] == "agree", entry


def test_peers_are_never_imported_by_vbstore():
    code = ("import sys, vbstore, vbstore.cli, vbstore.engine, vbstore.tasks, vbstore.interop; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('visbench', 'clip_benchmark', 'visin')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(HARNESS.parents[1])})
    assert out.stdout.strip() == "[]"


def test_every_run_has_rows_and_every_row_a_run():
    assert {row.run for row in conformance.ROWS} == set(conformance.RUNS)
    keys = [(row.run, row.ours) for row in conformance.ROWS]
    assert len(keys) == len(set(keys))
