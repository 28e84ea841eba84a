"""Visin's run metadata on ``evaluate`` and ``import results``: ``--uuid`` (a retried upload is
the stored evaluation; a different one under it is refused), ``--run``/``--epoch`` provenance
and ``--project`` (kept in the evaluation), and the board's project pool and pages."""

import json

import pytest
from click.testing import CliRunner
from suites_support import evidence, road_test

from vbstore.cli import cli
from vbstore.errors import UuidConflict
from vbstore.store import rebuild_registry
from vbstore.suites import board_page, build, leaderboard, push_suite, record

RESULTS = {"day": {"overall": {"miou": 0.8, "pixel_acc": 0.9}},
           "night": {"overall": {"miou": 0.7, "pixel_acc": 0.85}}}
FLAGS = ("--sample-count", "day=1200", "--sample-count", "night=800")


@pytest.fixture
def run(tmp_path):
    runner = CliRunner()
    return lambda *args: runner.invoke(cli, ["--store", str(tmp_path / "s"), *args])


@pytest.fixture
def files(tmp_path, run):
    suite = tmp_path / "road.json"
    suite.write_text(json.dumps(road_test()))
    assert run("suite", "push", str(suite)).exit_code == 0
    results = tmp_path / "results.json"
    results.write_text(json.dumps(RESULTS))
    weights = tmp_path / "epoch_40.pth"
    weights.write_bytes(b"weights")
    return results, weights


def _evaluate(run, results, weights, *flags):
    return run("evaluate", str(results), "--suite", "road-test@1", "--checkpoint", str(weights),
               *FLAGS, "--json", *flags)


def test_a_retried_upload_under_its_uuid_is_the_stored_evaluation(run, files, tmp_path):
    results, weights = files
    first = _evaluate(run, results, weights, "--uuid", "u-1", "--run", "train-7", "--epoch", "40",
                      "--project", "road")
    assert first.exit_code == 0, first.output
    stored = json.loads(first.stdout)
    assert (stored["run"], stored["project"]) == ({"id": "train-7", "epoch": 40}, "road")
    again = json.loads(_evaluate(run, results, weights, "--uuid", "u-1", "--run", "train-7",
                                 "--epoch", "40", "--project", "road").stdout)
    assert (again["id"], again["new"], again["recorded"]) == (stored["id"], False,
                                                              stored["recorded"])
    # other numbers under that uuid: refused, exit 11, nothing stored
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps({**RESULTS, "night": {"overall": {"miou": 0.75,
                                                                    "pixel_acc": 0.85}}}))
    refused = _evaluate(run, changed, weights, "--uuid", "u-1", "--run", "train-7", "--epoch",
                        "40", "--project", "road")
    assert refused.exit_code == 11
    assert f"already names evaluation {stored['id'][:12]}" in refused.output
    # so is a different provenance: run and epoch are part of what was sent
    assert _evaluate(run, results, weights, "--uuid", "u-1", "--run", "train-7", "--epoch", "41",
                     "--project", "road").exit_code == 11
    listed = json.loads(run("evaluations", "--json").stdout)
    assert [row["id"] for row in listed] == [stored["id"]]
    # the same evaluation under another uuid is still the one evaluation (one attempt)
    other = json.loads(_evaluate(run, results, weights, "--uuid", "u-2", "--run", "train-7",
                                 "--epoch", "40", "--project", "road").stdout)
    assert other["id"] == stored["id"]


def test_the_evaluation_shows_its_run_metadata(run, files):
    results, weights = files
    out = run("evaluate", str(results), "--suite", "road-test@1", "--checkpoint", str(weights),
              *FLAGS, "--project", "road", "--run", "train-7", "--epoch", "40")
    assert out.exit_code == 0, out.output
    assert "  project   road" in out.output
    assert "  from      run train-7, epoch 40" in out.output


def test_run_metadata_is_absent_unless_given_so_earlier_ids_stay(run, files):
    results, weights = files
    plain = json.loads(_evaluate(run, results, weights).stdout)
    assert "run" not in plain
    assert "project" not in plain
    # a uuid alone is no part of the evaluation: the same id
    assert json.loads(_evaluate(run, results, weights, "--uuid", "x").stdout)["id"] == plain["id"]
    tagged = json.loads(_evaluate(run, results, weights, "--epoch", "3").stdout)
    assert tagged["id"] != plain["id"]
    assert tagged["run"] == {"epoch": 3}


def test_import_results_takes_the_run_metadata(run, files):
    results, weights = files
    out = run("import", "results", str(results), "--suite", "road-test@1", "--checkpoint",
              str(weights), *FLAGS, "--uuid", "imp", "--project", "lab", "--run", "r9", "--json")
    assert out.exit_code == 0, out.output
    (evaluation,) = json.loads(out.stdout)
    assert (evaluation["project"], evaluation["run"]) == ("lab", {"id": "r9"})
    again = run("import", "results", str(results), "--suite", "road-test@1", "--checkpoint",
                str(weights), *FLAGS, "--uuid", "imp", "--project", "other", "--json")
    assert again.exit_code == 11


def test_a_uuid_names_one_upload_not_a_file_of_several(run, files, tmp_path):
    lines = tmp_path / "visbench.jsonl"
    lines.write_text("".join(json.dumps(
        {"backbone": name, "backbone_key": name, "task": "segmentation", "split": "day",
         "dataset": "road", "metrics": {"miou": 0.5}}) + "\n" for name in ("a", "b")))
    out = run("import", "results", str(lines), "--suite", "road-test@1", "--uuid", "one")
    assert out.exit_code == 2
    assert "makes 2 evaluations" in out.output
    assert json.loads(run("evaluations", "--json").stdout) == []


@pytest.mark.parametrize(("flag", "value"), [("--project", " "), ("--run", ""), ("--uuid", "")])
def test_empty_metadata_is_refused(run, files, flag, value):
    results, weights = files
    out = _evaluate(run, results, weights, flag, value)
    assert out.exit_code == 2
    assert json.loads(run("evaluations", "--json").stdout) == []


def _checkpoint(store, suite, n, score, project=None):
    fields = evidence(day=score, night=score)
    fields["checkpoint"] = {"id": f"{n:064x}", "label": f"model-{n:02d}", "weights": "pretrained"}
    return record(store, build(suite, **fields, project=project))


def test_the_board_ranks_within_a_project(store):
    suite = push_suite(store, road_test())[0]
    _checkpoint(store, suite, 1, 0.9, project="road")
    _checkpoint(store, suite, 2, 0.8, project="road")
    _checkpoint(store, suite, 3, 0.95, project="lab")
    _checkpoint(store, suite, 4, 0.99)
    assert [r["label"] for r in leaderboard(store, "road-test@1").rows] == [
        "model-04", "model-03", "model-01", "model-02"]
    board = leaderboard(store, "road-test@1", project="road")
    assert [(r["rank"], r["label"]) for r in board.rows] == [(1, "model-01"), (2, "model-02")]
    assert board.as_dict()["project"] == "road"
    assert "project" not in leaderboard(store, "road-test@1").as_dict()


def test_board_pages_keep_global_ranks(store):
    suite = push_suite(store, road_test())[0]
    for n, score in enumerate((0.9, 0.8, 0.8, 0.7, 0.6), start=1):
        _checkpoint(store, suite, n, score)
    whole = leaderboard(store, "road-test@1")
    page = board_page(whole, page=2, limit=2)
    assert [(r["rank"], r["label"]) for r in page.rows] == [(2, "model-03"), (4, "model-04")]
    assert page.pagination == {"ranked": {"page": 2, "limit": 2, "total": 5, "pages": 3},
                               "unranked": {"page": 1, "limit": 2, "total": 0, "pages": 1}}
    assert board_page(whole) is whole  # no page asked: the whole board


def test_board_page_flags(run, files, tmp_path):
    results, _ = files
    for n in range(3):
        w = tmp_path / f"w{n}.pth"
        w.write_bytes(bytes([n]))
        assert _evaluate(run, results, w, "--label", f"m{n}").exit_code == 0
    text = run("leaderboard", "road-test@1", "--page", "2", "--limit", "2")
    assert text.exit_code == 0, text.output
    assert "3 ranked of 3 checkpoints" in text.output
    assert "(ranked checkpoints: page 2 of 2 (1 of 3 shown))" in text.output
    paged = json.loads(run("leaderboard", "road-test@1", "--limit", "1", "--json").stdout)
    assert [r["rank"] for r in paged["rows"]] == [1]
    assert paged["pagination"]["ranked"]["pages"] == 3
    for bad in (["--page", "4", "--limit", "1"], ["--limit", "101"], ["--page", "0"],
                ["--all", "--page", "1"]):
        out = run("leaderboard", "road-test@1", *bad)
        assert out.exit_code == 2, (bad, out.output)


def test_a_uuid_conflict_is_refused_in_the_library(store):
    suite = push_suite(store, road_test())[0]
    first = record(store, build(suite, **evidence()), uuid="u")
    assert record(store, build(suite, **evidence()), uuid="u").id == first.id
    with pytest.raises(UuidConflict):
        record(store, build(suite, **evidence(day=0.1)), uuid="u")
    assert len(store.ls("evaluation")) == 1


def test_a_rebuilt_registry_keeps_projects_and_forgets_uuids(store):
    from vbstore.suites import reindex, uuid_names

    suite = push_suite(store, road_test())[0]
    record(store, build(suite, **evidence(), project="road"), uuid="u")
    assert uuid_names(store, "u") is not None
    rebuild_registry(store, force=True)
    reindex(store)
    assert [r["label"] for r in leaderboard(store, "road-test@1", project="road").rows] == [
        "model-a"]
    assert uuid_names(store, "u") is None  # no document holds it (docs/suites.md says so)
