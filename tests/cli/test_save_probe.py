"""``run TASK --save-probe PATH`` (VisBench's flag): the trained head written as a safetensors
file with its backbone's identity inside; refused, before anything runs, where no one head is
trained."""

import json

from safetensors import safe_open

TINY = ["-b", "test_cnn", "--weights", "random", "--input-size", "32"]


def test_save_probe_writes_the_trained_head(run, shapes, tmp_path):
    path = tmp_path / "probe.safetensors"
    out = run("run", "classification", *TINY, "-d", shapes, "--split", "val", "--train-data",
              shapes, "--train-split", "train", "--epochs", "3", "--save-probe", str(path),
              "--json")
    assert out.exit_code == 0, out.output
    head = json.loads(out.stdout)["record"]["inputs"]["head"]
    with safe_open(str(path), "pt") as f:
        compat = json.loads(f.metadata()["vbstore.compat"])
    assert compat["task"] == "classification"
    shown = json.loads(run("import", "head", str(path), "--json").stdout)
    assert shown["id"] == head  # the same bytes: the same id


def test_save_probe_is_refused_before_a_zero_shot_run(run, shapes, tmp_path):
    path = tmp_path / "probe.safetensors"
    out = run("run", "retrieval", *TINY, "-d", shapes, "--split", "val", "--save-probe",
              str(path))
    assert out.exit_code == 2
    assert "zero-shot: it trains nothing" in out.output
    assert not path.exists()
    assert json.loads(run("ls", "result", "--json").stdout) == []


def test_save_probe_with_several_seeds_is_refused(run, shapes, tmp_path):
    out = run("run", "classification", *TINY, "-d", shapes, "--split", "val", "--train-data",
              shapes, "--train-split", "train", "--seeds", "2", "--save-probe",
              str(tmp_path / "p.safetensors"))
    assert out.exit_code == 2
    assert "one per seed" in out.output
