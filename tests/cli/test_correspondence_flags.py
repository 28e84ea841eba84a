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
        "recall@0.5p", "recall@1p", "auc@0.5p", "auc@1p", "ceiling_recall@0.5p",
        "ceiling_recall@1p", "ceiling_auc@0.5p", "ceiling_auc@1p", "num_matches"])
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


def test_a_visbench_record_in_patch_units_imports_under_its_own_names(run, tmp_path):
    """A suite made from correspondence in patch units names VisBench's patch metrics (its
    headline the recall at the smallest threshold), and VisBench's record of such a run imports
    with every metric as written: none missing."""
    suite_file = tmp_path / "corr.json"
    made = run("suite", "new", "--slug", "corr-patch", "-t", "correspondence", "-d",
               "scenes:per_split=3,size=32", "--split", "val", "--condition", "val=val",
               "--weights", "random", "-p", "units=patch", "-o", str(suite_file))
    assert made.exit_code == 0, made.output
    metrics = json.loads(suite_file.read_text())["protocol"]["metrics"]
    assert [m["key"] for m in metrics if m["headline"]] == ["recall@0.5p"]
    names = [f"{k}@{t}p" for k in ("recall", "auc") for t in ("0.5", "1", "2", "4")]
    # VisBench's names: auc at every threshold, as its record carries them
    assert {m["key"] for m in metrics} == {*names, *(f"ceiling_{n}" for n in names),
                                           "num_matches"}
    assert run("suite", "push", str(suite_file)).exit_code == 0
    scores = {name: 0.5 for name in names} | {"num_matches": 900.0}
    record = {  # the fields VisBench 0.27 writes for `correspondence --units patch`
        "backbone": "dinov2_vits14", "task": "correspondence", "level": "mid_level",
        "dataset": "scenes", "split": "val", "pooling": "mean", "pooling_requested": "default",
        "feature_mode": "dense", "metrics": scores | {f"ceiling_{n}": 0.9 for n in names},
        "timestamp": "2026-01-01T00:00:00+00:00", "visbench_version": "0.27.0",
        "schema_version": 9, "dataset_size": 3, "dataset_params": {}, "seed": 0, "notes": None,
        "task_params": {"num_corr": 1000, "ratio_threshold": 0.9,
                        "thresholds": [0.5, 1, 2, 4], "threshold_units": "patch"},
    }
    (tmp_path / "vb.jsonl").write_text(json.dumps(record) + "\n")
    out = run("import", "results", str(tmp_path / "vb.jsonl"), "--suite", "corr-patch@1",
              "--json")
    assert out.exit_code == 0, out.output
    vb = json.loads(out.output)[0]
    assert not [r for r in vb["verdict"]["reasons"] if r.startswith("metric-missing")], vb
    assert vb["results"]["val"]["overall"]["recall@0.5p"] == 0.5
    # vbstore's own result on the suite: the same samples (suite new reads the data as the task
    # does), the same settings and names: no reason against it
    ours = run("get", "result", *TINY, "-t", "correspondence", "-d",
               "scenes:per_split=3,size=32", "--units", "patch", "--suite", "corr-patch@1")
    assert ours.exit_code == 0, ours.output
    evaluation = json.loads(ours.stdout)
    verdict = evaluation["verdict"]
    assert (verdict["state"], verdict["reasons"]) == ("eligible", []), verdict
    assert verdict["scores"]["overall"]["recall@0.5p"] >= 0.0


def test_a_suite_pinning_op_version_1_never_ranks_a_result_of_op_version_2(run, tmp_path):
    """correspondence op_version 2 (VisBench's auc@T): a suite made before it (op_version 1
    pinned, as the reference registry's ref-correspondence@1 is) judges today's result
    incompatible, naming both versions; a suite made today pins 2 and names auc at every
    threshold."""
    data = ["-d", "scenes:per_split=3,size=32", "--split", "val", "--condition", "val=val",
            "--weights", "random"]
    for slug, pin in (("corr-old", ["--pin", "op_version=1"]), ("corr-new", [])):
        made = run("suite", "new", "--slug", slug, "-t", "correspondence", *data, *pin,
                   "-o", str(tmp_path / f"{slug}.json"))
        assert made.exit_code == 0, made.output
        assert run("suite", "push", str(tmp_path / f"{slug}.json")).exit_code == 0
    new = json.loads((tmp_path / "corr-new.json").read_text())
    assert new["vbstore"]["settings"]["op_version"] == 2
    assert {"auc@1px", "auc@2px", "auc@5px", "auc@10px"} <= {
        m["key"] for m in new["protocol"]["metrics"]}
    verdicts = {}
    out = run("get", "result", *TINY, "-t", "correspondence", "-d",
              "scenes:per_split=3,size=32", "--suite", "corr-new@1")
    assert out.exit_code == 0, out.output
    verdicts["corr-new"] = json.loads(out.stdout)["verdict"]
    # get result --suite refuses the old suite before computing, naming both versions...
    old = run("get", "result", *TINY, "-t", "correspondence", "-d",
              "scenes:per_split=3,size=32", "--suite", "corr-old@1")
    assert old.exit_code == 2, old.output
    assert "corr-old@1 pins correspondence op_version 1; this vbstore computes op_version 2" \
        in old.output
    # ...and today's result, judged on it, is incompatible
    source = json.loads(out.stdout)["sources"]["val"]
    verdicts["corr-old"] = json.loads(
        run("evaluate", source, "--suite", "corr-old@1", "--json").stdout)["verdict"]
    assert verdicts["corr-old"]["state"] == "incompatible"
    assert "op_version(2 != 1)" in verdicts["corr-old"]["reasons"]
    assert (verdicts["corr-new"]["state"], verdicts["corr-new"]["reasons"]) == ("eligible", [])


def test_plot_task_reads_the_headline_the_results_name(run, flat, tmp_path):
    # correspondence's headline follows --units/--thresholds (headline_for): a plot of the task
    # draws the one its results name, and refuses results that name different ones rather than
    # leave some out
    from vbstore import Store
    from vbstore.errors import UsageError
    from vbstore.plots import backbone_bars, task_bars

    patch = run("run", "correspondence", *TINY, "-d", flat, "--units", "patch")
    assert patch.exit_code == 0, patch.output
    with Store(tmp_path / "s") as store:
        (bar,) = task_bars(store, "correspondence")
        assert bar.metric == "recall@0.5p"
        assert bar.value == json.loads(patch.stdout)["record"]["metrics"]["recall@0.5p"]
    assert run("run", "correspondence", *TINY, "-d", flat).exit_code == 0  # recall@1px
    with Store(tmp_path / "s") as store:
        with pytest.raises(UsageError, match=r"recall@0\.5p, recall@1px") as info:
            task_bars(store, "correspondence")
        assert "--metric" in info.value.hint
        (bar,) = task_bars(store, "correspondence", metric="recall@1px")
        assert bar.metric == "recall@1px"
        # one backbone's bars: one per headline, never the larger of two different metrics
        bars = backbone_bars(store, "test_vit")
        assert sorted(b.metric for b in bars) == ["recall@0.5p", "recall@1px"]
