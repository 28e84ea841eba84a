"""VisBench records out: ``export results --format visbench`` and ``--results FILE`` on ``run``
and ``get result``, read back by VisBench 0.27's own ``read_records`` in its own process.

VisBench is installed the way the conformance tier installs its peers (``pip install --no-deps
--target DIR visbench==0.27.0``, benchmarks/conformance.py), or read from
``VBSTORE_CONFORMANCE_PEERS``; it is never imported by vbstore or by this test's process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vbstore.interop import VISBENCH_FIELDS

ROOT = Path(__file__).resolve().parents[2]
TINY = ["-b", "test_cnn", "--weights", "random", "--input-size", "32"]

# VisBench's reader, run by the peer's own interpreter, once for several files: each file's
# records and the comparability groups its leaderboard would rank within, or the error its
# reader raised
READER = """
import json, sys, traceback
import visbench
from visbench.results import read_records
from visbench.results.leaderboard import group_comparable
out = {"version": visbench.__version__, "files": []}
for path in sys.argv[1:]:
    try:
        records = read_records(path)
    except Exception:
        out["files"].append({"error": traceback.format_exc()})
        continue
    out["files"].append({"records": [r.to_dict() for r in records],
                         "groups": len(group_comparable(records))})
print(json.dumps(out))
"""


def _read_with_visbench(site: Path, *paths: Path) -> tuple[str, list[dict]]:
    """VisBench's version, and what its reader made of each file."""
    out = subprocess.run([sys.executable, "-c", READER, *map(str, paths)], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(site)}, check=False)
    assert out.returncode == 0, out.stderr
    read = json.loads(out.stdout)
    return read["version"], read["files"]


def _get(shapes: str, *extra: str) -> list[str]:
    return ["get", "result", *TINY, "-t", "retrieval", "-d", shapes, "--split", "val", *extra]


def test_results_appends_one_record_per_run_cached_or_not(run, shapes, tmp_path):
    out = tmp_path / "deep" / "visbench.jsonl"  # parent folders made, as VisBench's writer does
    first = run(*_get(shapes, "--results", str(out), "--json"))
    assert first.exit_code == 0, first.output
    answer = json.loads(first.stdout)
    again = run(*_get(shapes, "--results", str(out), "--json"))
    assert json.loads(again.stdout)["from_cache"] is True
    trained = run("run", "classification", *TINY, "-d", shapes, "--split", "val",
                  "--train-data", shapes, "--train-split", "train", "--epochs", "5",
                  "--results", str(out))
    assert trained.exit_code == 0, trained.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 3
    assert all(tuple(sorted(line)) == tuple(sorted(VISBENCH_FIELDS)) for line in lines)
    assert lines[0] == lines[1]  # the stored result's own record, its time the computation's
    retrieval, classification = lines[0], lines[2]
    assert retrieval["metrics"] == pytest.approx(answer["record"]["metrics"])
    assert (retrieval["schema_version"], retrieval["level"], retrieval["split"]) == (
        9, "high_level", "val")
    assert retrieval["backbone_key"] == f"vbstore:{answer['record']['inputs']['backbone']}"
    assert retrieval["training"] is None  # a zero-shot probe fits nothing
    assert classification["training"]["train_loss"] > 0
    assert classification["task_params"]["epochs"] == 5
    assert classification["pooling"] == "mean"  # a CNN's global average, VisBench's name
    # the export writes the same lines for the same results
    exported = run("export", "results", "--format", "visbench", "--task", "retrieval")
    assert [json.loads(line) for line in exported.stdout.splitlines()] == [retrieval]


def test_a_dense_probe_records_mean_pooling_as_visbench_does(run, tmp_path):
    from vbstore.data import make_scenes

    scenes = str(make_scenes(tmp_path / "scenes", per_split=4, seed=1, size=32))
    out = tmp_path / "dense.jsonl"
    done = run("run", "generic_segmentation", *TINY, "-d", scenes, "--split", "val",
               "--train-data", scenes, "--train-split", "train", "--target", "masks",
               "--epochs", "1", "--results", str(out))
    assert done.exit_code == 0, done.output
    (line,) = [json.loads(text) for text in out.read_text().splitlines()]
    assert (line["pooling"], line["pooling_requested"], line["level"]) == (
        "mean", "mean", "mid_level")
    assert line["task_params"]["protocol"] == "visbench_binary_seg"
    assert line["dataset_params"]["target"] == "masks"


def test_results_with_suite_is_refused(run, shapes, tmp_path):
    refused = run(*_get(shapes, "--suite", "road@1", "--results", str(tmp_path / "r.jsonl")))
    assert refused.exit_code == 2
    assert "--results writes one run's record" in refused.output
    assert not (tmp_path / "r.jsonl").exists()


def test_the_answer_cache_never_swallows_results(shapes, tmp_path):
    """The same command line three times through the real entry point (whose answer cache
    answers a repeated ``get result`` before click loads): three lines."""
    out = tmp_path / "r.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VBSTORE_HOME": str(tmp_path / "s")}
    for _ in range(3):
        done = subprocess.run([sys.executable, "-m", "vbstore",
                               *_get(shapes, "--results", str(out))],
                              capture_output=True, text=True, env=env, check=False)
        assert done.returncode == 0, done.stderr
    assert len(out.read_text().splitlines()) == 3


@pytest.mark.slow
def test_visbench_reads_vbstore_records_with_its_own_reader(run, shapes, tmp_path,
                                                            visbench_site):
    out = tmp_path / "visbench.jsonl"
    assert run(*_get(shapes, "--results", str(out))).exit_code == 0
    assert run(*_get(shapes, "--seed", "1", "--results", str(out))).exit_code == 0
    assert run("run", "classification", *TINY, "-d", shapes, "--split", "val", "--train-data",
               shapes, "--train-split", "train", "--epochs", "5", "--notes", "first try",
               "--results", str(out)).exit_code == 0
    exported = tmp_path / "export.jsonl"
    done = run("export", "results", "--format", "visbench", "-o", str(exported))
    assert done.exit_code == 0, done.output
    jsonl = tmp_path / "rows.jsonl"
    assert run("export", "results", "--format", "jsonl", "-o", str(jsonl)).exit_code == 0
    version, (read, back, refused) = _read_with_visbench(visbench_site, out, exported, jsonl)
    assert version == "0.27.0"
    records = read["records"]
    assert [r["task"] for r in records] == ["retrieval", "retrieval", "classification"]
    assert records[2]["notes"] == "first try"
    # the two retrieval seeds are one comparable group (a seed is no part of the protocol)
    assert read["groups"] == 2
    assert sorted((r["task"], r["seed"]) for r in back["records"]) == [
        ("classification", 0), ("retrieval", 0), ("retrieval", 1)]
    # what vbstore's jsonl export writes is not VisBench's record: its reader refuses it
    assert "records" not in refused
    assert "schema_version" in refused["error"]


def test_an_import_names_vbstore_as_the_evaluator_of_its_own_records():
    from vbstore.suites._import import _visbench

    item = {"backbone": "test_cnn", "backbone_key": "vbstore:" + "a" * 64, "task": "retrieval",
            "split": "val", "dataset": "shapes", "metrics": {"mAP": 0.5}}
    ours = _visbench({**item, "visbench_version": "vbstore 0.1.0"})[3]["evaluator"]
    theirs = _visbench({**item, "visbench_version": "0.27.0"})[3]["evaluator"]
    assert (ours, theirs) == ({"package": "vbstore", "version": "0.1.0"},
                              {"package": "visbench", "version": "0.27.0"})


@pytest.mark.parametrize("fmt", ["visbench", "md", "csv", "jsonl"])
def test_an_export_to_a_folder_is_refused_naming_the_file_it_wants(run, tmp_path, fmt):
    out = run("export", "results", "--format", fmt, "-o", str(tmp_path))
    assert out.exit_code == 2  # was "Is a directory" from the filesystem, exit 7 (a store write)
    assert f"-o {tmp_path} is a folder; --format {fmt} writes one file" in out.output
    assert "only --format clip-benchmark writes into a folder" in out.output
