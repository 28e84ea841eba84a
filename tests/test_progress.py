"""Work you can see: progress lines on stderr when it is not a terminal, and what was reused."""

from __future__ import annotations

import json
import os
import re

import pytest
from click.testing import CliRunner

from vbstore.cli import cli

TINY = ["-b", "test_cnn", "--weights", "random"]


@pytest.fixture(scope="module")
def shapes(shapes_folder):
    return shapes_folder(3, 2)


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setenv("VBSTORE_PROGRESS_INTERVAL", "0")  # a line after every unit
    monkeypatch.delenv("VBSTORE_PROGRESS", raising=False)
    runner = CliRunner()
    return lambda *args: runner.invoke(cli, ["--store", str(tmp_path / "s"), *args])


def _data(shapes):
    return ["-d", shapes, "--split", "val", "--train-data", shapes, "--train-split", "train"]


def test_extraction_and_head_training_write_plain_lines(run, shapes):
    out = run("run", "classification", *TINY, *_data(shapes), "--epochs", "3")
    assert out.exit_code == 0, out.output
    lines = out.stderr.splitlines()
    # each line names the backbone, then the split, then the step
    for split in ("train", "val"):
        assert any(re.fullmatch(rf"\[test_cnn random seed=0 {split}\] extracting features: "
                                r"image 15/15 \(\d+ s\)", x) for x in lines), lines
    head = "[test_cnn random seed=0] training classification head: "
    epochs = [x for x in lines if x.startswith(head)]
    assert [x.split(",")[0] for x in epochs] == [f"{head}epoch {i}/3" for i in (1, 2, 3)]
    assert all(re.search(r", loss \d", x) for x in epochs)
    # per feature set: what was computed now
    assert "  eval features: extracted 15 images, reused 0  [" in out.stdout
    assert "  train features: extracted 15 images, reused 0  [" in out.stdout


def test_quiet_shows_no_progress_and_json_keeps_it_on_stderr(run, shapes):
    quiet = run("--quiet", "run", "classification", *TINY, *_data(shapes), "--epochs", "2")
    assert quiet.exit_code == 0, quiet.output
    assert "training" not in quiet.stderr
    assert "extracting" not in quiet.stderr
    # --quiet after the subcommand too
    after = run("run", "classification", *TINY, *_data(shapes), "--epochs", "3", "-q")
    assert after.exit_code == 0, after.output
    assert "training" not in after.stderr
    as_json = run("run", "classification", *TINY, *_data(shapes), "--epochs", "4", "--json")
    assert as_json.exit_code == 0, as_json.output
    # a long batch job still logs its steps; stdout stays one JSON document
    assert "training classification head: epoch 4/4" in as_json.stderr
    features = json.loads(as_json.stdout)["features"]  # the features came from the store
    assert {r: (f["stored"], f["extracted"], f["reused"]) for r, f in features.items()} == {
        "eval": (True, 0, 15), "train": (True, 0, 15)}


def test_dense_scoring_writes_its_batches(run):
    scenes = "scenes:per_split=3,size=32,seed=0"
    out = run("get", "result", *TINY, "-t", "depth", "-d", scenes, "--split", "val",
              "--train-data", scenes, "--train-split", "train", "--target", "depth",
              "-p", "epochs=1", "-p", "target_scale=1000", "-p", "batch_size=2")
    assert out.exit_code == 0, out.output
    assert "[test_cnn random seed=0] training depth head: epoch 1/1, loss " in out.stderr
    assert "[test_cnn random seed=0] scoring depth: batch 2/2 (" in out.stderr


def test_push_and_pull_write_their_files(tmp_path, monkeypatch, shapes):
    monkeypatch.setenv("VBSTORE_PROGRESS_INTERVAL", "0")
    monkeypatch.delenv("VBSTORE_PROGRESS", raising=False)
    runner = CliRunner()

    def vb(store, *args):
        out = runner.invoke(cli, ["--store", str(tmp_path / store), *args])
        assert out.exit_code == 0, out.output
        return out

    for store in ("a", "b"):
        vb(store, "remote", "add", "team", str(tmp_path / "team"))
    vb("a", "get", "head", *TINY, "-t", "knn", "--train-data", shapes, "--train-split",
       "train", "--tag", "h")
    pushed = vb("a", "push", "h", "--to", "team").stderr.splitlines()
    assert any(re.fullmatch(r"pushing to team: file \d+/\d+ \(\d+ s\)", x) for x in pushed)
    pulled = vb("b", "pull", "team/h").stderr.splitlines()
    assert any(re.fullmatch(r"pulling from team: blob \d+/\d+ \(\d+ s\)", x) for x in pulled)


def _step(monkeypatch, *, seconds: float, total: int = 3, isatty: bool = False, columns: int = 80):
    """Run a fake step of ``total`` units over ``seconds`` of a fake clock; its stderr lines."""
    import io

    from vbstore import _progress

    now = [0.0]
    monkeypatch.setattr(_progress.time, "monotonic", lambda: now[0])
    err = io.StringIO()
    err.isatty = lambda: isatty  # type: ignore[method-assign]
    err.fileno = lambda: 2  # type: ignore[method-assign]
    monkeypatch.setattr(_progress.sys, "stderr", err)
    monkeypatch.setattr(_progress.os, "get_terminal_size",
                        lambda fd: os.terminal_size((columns, 0)))
    with _progress.reporting(True), _progress.about("bb", "val"), \
            _progress.progress("extracting features", total, "image") as bar:
        for i in range(total):
            now[0] = seconds * (i + 1) / total
            bar.update(1)
    return err.getvalue().splitlines()


def test_first_line_comes_within_a_couple_of_seconds(monkeypatch):
    monkeypatch.delenv("VBSTORE_PROGRESS_INTERVAL", raising=False)  # every 10 s after the first
    lines = _step(monkeypatch, seconds=7.5)  # units end at 2.5, 5 and 7.5 s
    assert lines == ["[bb val] extracting features: image 1/3 (2 s)",
                     "[bb val] extracting features: image 3/3 (8 s)"]
    assert _step(monkeypatch, seconds=1.5) == []  # a short step says nothing


def test_a_terminal_with_no_size_gets_plain_lines(monkeypatch):
    monkeypatch.setenv("VBSTORE_PROGRESS_INTERVAL", "0")
    lines = _step(monkeypatch, seconds=3, isatty=True, columns=0)
    assert lines[-1] == "[bb val] extracting features: image 3/3 (3 s)"


def test_sweep_json_keeps_progress_on_stderr(run, shapes, tmp_path):
    backbones = tmp_path / "backbones.txt"
    backbones.write_text("test_cnn weights=random\n")
    out = run("sweep", "--backbones", str(backbones), "--tasks", "knn",
              *_data(shapes), "--json")
    assert out.exit_code == 0, out.output
    json.loads(out.stdout)  # stdout stays one JSON document
    assert "[test_cnn random seed=0 val] extracting features: image 15/15" in out.stderr
