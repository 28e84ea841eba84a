"""correspondence's ``--units`` and ``--thresholds`` on ``run`` and ``get result`` (VisBench's
flags, issue 23): the metric names follow them, the defaults keep their id, bad values are
refused in one line before anything is stored."""

import json
from pathlib import Path

import pytest

TINY = ["-b", "test_vit", "--weights", "random", "--input-size", "32", "--json"]


@pytest.fixture(scope="module")
def flat(tmp_path_factory):
    """A flat folder of 3 unlabelled 32 px images."""
    from PIL import Image

    from vbstore.data import make_scenes

    root = tmp_path_factory.mktemp("corr")
    scenes = make_scenes(root / "scenes", per_split=3, seed=5, size=32)
    folder = root / "flat"
    folder.mkdir()
    for i in range(3):
        Image.open(scenes / "val" / "images" / f"{i:04d}.png").save(folder / f"{i:02d}.png")
    return str(folder)


def _objects(tmp_path) -> list[Path]:
    return sorted(p for p in (tmp_path / "s" / "objects").rglob("*") if p.is_file())


def test_units_and_thresholds_name_the_metrics_and_key_the_result(run, flat):
    default = run("run", "correspondence", *TINY, "-d", flat)
    assert default.exit_code == 0, default.output
    plain = json.loads(default.stdout)
    # the defaults, however written, are the same question: the stored answer, the same id
    for way in (["--units", "pixel", "--thresholds", "10,5,2,1"], ["-p", "thresholds=[1,2,5,10]"]):
        same = json.loads(run("get", "result", *TINY, "-t", "correspondence", "-d", flat,
                              *way).stdout)
        assert (same["id"], same["from_cache"]) == (plain["id"], True)
    patch = run("run", "correspondence", *TINY, "-d", flat, "--units", "patch",
                "--thresholds", "1 0.5")
    assert patch.exit_code == 0, patch.output
    record = json.loads(patch.stdout)["record"]
    assert record["params"]["units"] == "patch"
    assert record["params"]["thresholds"] == "0.5,1"
    assert sorted(record["metrics"]) == sorted([
        "recall@0.5p", "recall@1p", "auc@1p", "ceiling_recall@0.5p", "ceiling_recall@1p",
        "ceiling_auc@1p", "num_matches"])
    assert record["metrics"]["num_matches"] == plain["record"]["metrics"]["num_matches"]
    again = json.loads(run("get", "result", *TINY, "-t", "correspondence", "-d", flat,
                           "--units", "patch", "-p", "thresholds=0.5,1").stdout)
    assert (again["id"], again["from_cache"]) == (json.loads(patch.stdout)["id"], True)
    text = run("run", "correspondence", *TINY[:-1], "-d", flat, "--units", "patch",
               "--thresholds", "0.5,1")
    assert "recall@0.5p" in text.output  # the record's own order, its own names


@pytest.mark.parametrize(("flags", "words"), [
    (["--thresholds", "0"], "threshold '0' is not a number > 0"),
    (["--thresholds", "1,1"], "threshold 1 is given twice"),
    (["--thresholds", "2,x"], "threshold 'x' is not a number > 0"),
    (["-p", "units=inch"], "must be one of 'pixel', 'patch'"),
    (["--thresholds", "1", "-p", "thresholds=2"], "disagree"),
])
def test_bad_values_are_refused_before_anything_is_stored(run, flat, tmp_path, flags, words):
    for command in (["run", "correspondence"], ["get", "result", "-t", "correspondence"]):
        out = run(*command, *TINY, "-d", flat, *flags)
        assert out.exit_code == 2, out.output
        assert words in out.output
        assert len(out.output.strip().splitlines()) <= 2  # the error and its hint
        assert _objects(tmp_path) == []


def test_units_on_another_task_is_refused(run, flat, tmp_path):
    out = run("get", "result", *TINY, "-t", "retrieval", "-d", flat, "--units", "patch")
    assert out.exit_code == 2
    assert "--units does not apply to task 'retrieval'" in out.output
    assert _objects(tmp_path) == []
