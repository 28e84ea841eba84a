"""`import results` and suite files: every malformed or oversized file is one line and exit 2,
read with bounded memory, and nothing is stored (issue 32)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from vbstore import Store
from vbstore.cli import cli
from vbstore.suites import _files

SUITE = {
    "slug": "imp-knn", "version": 1, "name": "kNN",
    "protocol": {"task": "knn", "data": {"kind": "external"},
                 "conditions": [{"name": "val", "sampleCount": 15}],
                 "metrics": [{"key": "top1", "headline": True}]},
}
VISBENCH = {"backbone": "b", "task": "knn", "split": "val", "metrics": {"top1": 0.5}}


@pytest.fixture
def store_with_suite(tmp_path):
    (tmp_path / "suite.json").write_text(json.dumps(SUITE))
    out = CliRunner().invoke(cli, ["--store", str(tmp_path / "s"), "suite", "push",
                                   str(tmp_path / "suite.json")])
    assert out.exit_code == 0, out.output
    return tmp_path / "s"


def _import(store, path):
    return CliRunner().invoke(cli, ["--store", str(store), "import", "results", str(path),
                                    "--suite", "imp-knn@1"])


def _evaluations(store) -> int:
    with Store(store) as s:
        return sum(1 for info in s.ls() if info.kind == "evaluation")


CASES = {
    "digits.jsonl": ('{"backbone": "b", "task": "knn", "metrics": {"top1": 1' + "0" * 5000
                     + "}}\n").encode(),
    "deep.jsonl": ('{"backbone": "b", "task": "knn", "metrics": {"top1": 0.5}, "x": '
                   + "[" * 100_000 + "]" * 100_000 + "}\n").encode(),
    "deep.json": ("[" * 100_000 + "]" * 100_000).encode(),
    "list.jsonl": json.dumps({**VISBENCH, "metrics": [0.5]}).encode(),
    "string.jsonl": json.dumps({**VISBENCH, "metrics": "0.5"}).encode(),
    "params.jsonl": json.dumps({**VISBENCH, "task_params": [1]}).encode(),
    "clip_list.json": json.dumps({"dataset": "val", "model": "RN50", "pretrained": "openai",
                                  "task": "zeroshot_classification",
                                  "metrics": [0.5]}).encode(),
    "latin1.jsonl": json.dumps({**VISBENCH, "backbone": "caf\u00e9"},
                               ensure_ascii=False).encode("latin-1"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_malformed_results_file_is_one_line_and_stores_nothing(store_with_suite, tmp_path,
                                                                name):
    path = tmp_path / name
    path.write_bytes(CASES[name])
    out = _import(store_with_suite, path)
    assert out.exit_code == 2, out.output
    assert out.exception is None or isinstance(out.exception, SystemExit), out.exception
    assert len(out.output.strip().splitlines()) == 1, out.output
    assert name in out.output
    assert _evaluations(store_with_suite) == 0


def test_a_well_formed_file_still_imports(store_with_suite, tmp_path):
    path = tmp_path / "ok.jsonl"
    path.write_text(json.dumps(VISBENCH) + "\n")
    out = _import(store_with_suite, path)
    assert out.exit_code == 0, out.output
    assert _evaluations(store_with_suite) == 1


def test_a_results_file_is_sized_before_it_is_parsed(store_with_suite, tmp_path, monkeypatch):
    path = tmp_path / "big.json"
    path.write_text("[" + ",".join(["[]"] * 3000) + "]")
    monkeypatch.setattr(_files, "MAX_RESULTS_VALUES", 1000)
    out = _import(store_with_suite, path)
    assert out.exit_code == 2, out.output
    assert "JSON values, over the 1000 allowed" in out.output
    monkeypatch.setattr(_files, "MAX_RESULTS_BYTES", 1000)
    out = _import(store_with_suite, path)
    assert out.exit_code == 2
    assert "over the 1000 bytes a results file may be" in out.output


@pytest.mark.slow
def test_a_32_mb_results_file_costs_bounded_memory(store_with_suite, tmp_path):
    """The issue's case: 32 MB of ``[],`` took 2.8 GB to refuse. In a child process, so its
    peak memory is its own."""
    def peak(path) -> tuple[int, int]:
        code = ("import resource; from click.testing import CliRunner; from vbstore.cli import cli;"
                f"out = CliRunner().invoke(cli, ['--store', {str(store_with_suite)!r}, 'import', "
                f"'results', {str(path)!r}, '--suite', 'imp-knn@1', '--dry-run']);"
                "print(out.exit_code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True)
        exit_code, kib = map(int, done.stdout.split()[-2:])
        return exit_code, kib

    small, big = tmp_path / "small.jsonl", tmp_path / "amplified.json"
    small.write_text(json.dumps(VISBENCH) + "\n")
    big.write_bytes(b"[" + b"[]," * ((32 << 20) // 3) + b"[]]")
    (small_exit, small_kib), (big_exit, big_kib) = peak(small), peak(big)
    assert (small_exit, big_exit) == (0, 2)
    # the file's bytes and text, not 2.8 GB of parsed lists
    assert big_kib - small_kib < 160 << 10, f"{(big_kib - small_kib) >> 10} MiB more"


def test_a_large_yaml_suite_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    """Issue 32: a 17.7 MB YAML suite was parsed for 132 s before a size check."""
    pytest.importorskip("yaml")
    path = tmp_path / "suite.yaml"
    path.write_text("slug: big\nnotes:\n" + "  - abcdefghij\n" * 200_000)  # 2.8 MB
    parsed = []
    import yaml

    monkeypatch.setattr(yaml, "parse", lambda *a, **k: parsed.append(1) or iter(()))
    monkeypatch.setattr(yaml, "safe_load", lambda *a, **k: parsed.append(1) or {})
    out = CliRunner().invoke(cli, ["--store", str(tmp_path / "s"), "suite", "push", str(path)])
    assert out.exit_code == 2, out.output
    assert "suite.yaml is 2.86 MiB, over the 1 MiB a suite file may be" in out.output
    assert parsed == []
