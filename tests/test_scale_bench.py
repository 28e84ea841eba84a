"""``benchmarks/scale_bench.py``'s per-image overhead (e), run small: each part fitted at N and 4N,
the nearly free forward's knn beside ``test_pixels``', two versions interleaved. No timing is
asserted, only that every figure is there and the ids agree (issue #36)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "scale_bench.py"


def _load_bench():
    sys.path.insert(0, str(SCRIPT.parent))  # it imports extract_bench beside it
    try:
        spec = importlib.util.spec_from_file_location("scale_bench", SCRIPT)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return module


def test_fit_gives_the_marginal_cost_and_the_fixed_part():
    # 2 s fixed + 50 ms per image: 2.5 s at 10 images, 4 s at 40
    assert _load_bench().fit(10, 2.5, 4.0) == {
        "overhead_s": 2.0, "img_per_s": 20.0, "ms_per_image": 50.0, "n_s": 2.5, "4n_s": 4.0}


def test_the_n_4n_and_warm_up_sets_share_no_image(tmp_path):
    # a cache of decoded images kept across the runs of one process would otherwise make 4N's
    # marginal cost look smaller than it is
    sets = _load_bench().overhead_sets(tmp_path, 10)
    contents = {size: {p.read_bytes() for p in folder.rglob("*.png")}
                for size, folder in sets.items()}
    assert {size: len(c) for size, c in contents.items()} == {"warm": 10, "n": 10, "4n": 40}
    assert len(set.union(*contents.values())) == 60


@pytest.mark.slow
def test_overhead_times_every_part_at_n_and_4n_under_two_versions(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--overhead", "--tiny-images", "40", "--rounds", "1",
         "--code", f"twin={REPO}", "--dir", str(tmp_path)],
        capture_output=True, text=True, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    *table, last = proc.stdout.strip().splitlines()
    rows = json.loads(last)
    assert list(rows) == ["twin", "this"]
    parts = {"decode", "manifest", "knn", "stored", "forward", "free_knn", "free_stored",
             "free_forward", "knn-fwd", "free-fwd"}
    for (run,) in rows.values():
        assert run["n"] == 40
        for clock in ("wall", "cpu"):
            assert set(run[clock]["slope_ms"]) == set(run[clock]["fixed_s"]) == parts
            assert set(run[clock]["whole_ms"]) == parts
            assert set(run[clock]["one_off_s"]) == {"decode", "manifest", "knn", "forward"}
        ids = run["ids"]
        for size in ("n", "4n"):  # a recompute from stored features keeps its result's id
            assert ids[f"stored@{size}"] == ids[f"knn@{size}"]
            assert ids[f"free_stored@{size}"] == ids[f"free_knn@{size}"]
            assert ids[f"free_knn@{size}"] != ids[f"knn@{size}"]  # another backbone
        assert ids["knn@n"] != ids["knn@4n"]  # another set of images
        assert run["cold"]["images"] == 160
        assert run["cold"]["result"] == ids["knn@4n"]
    assert rows["twin"][0]["ids"] == rows["this"][0]["ids"]
    text = "\n".join(table)
    assert "marginal ms per image" in text
    assert "issue 36's target, bench_pool knn / decode floor <= 2, this:" in text
    assert "same result ids everywhere (test_pixels and bench_pool knn at N and 4N" \
           " and their stored recomputes): True" in text
