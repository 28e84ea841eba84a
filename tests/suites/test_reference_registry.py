import json
import sqlite3
from pathlib import Path

import pytest

from vbstore.suites import UNTRAINED, reference

ROOT = Path(__file__).resolve().parents[2]


def test_readme_tables_are_generated_from_registry_db():
    readme = (ROOT / "README.md").read_text()
    tables = reference.render(ROOT / "registry.db")
    assert reference.splice(readme, tables) == readme, (
        "README tables drifted from registry.db: run `make registry` "
        "(or python -m vbstore.suites.reference readme README.md registry.db)"
    )


def test_registry_db_is_self_consistent_and_never_ranks_untrained_with_pretrained():
    conn = sqlite3.connect(f"file:{ROOT / 'registry.db'}?mode=ro", uri=True)
    boards = conn.execute("SELECT suite, weights FROM boards").fetchall()
    assert boards  # the README has something to show
    for suite, weights in boards:
        protocol = conn.execute(
            "SELECT coalesce(json_extract(document, '$.vbstore.weights'), "
            "json_extract(document, '$.protocol.weights')) FROM suites WHERE ref=?", (suite,)
        ).fetchone()[0]
        assert (weights in UNTRAINED) == (protocol == "random")
    # every board row points at a ranked evaluation whose results are stored
    for (evaluation,) in conn.execute("SELECT evaluation FROM board_rows"):
        ranked, sources = conn.execute(
            "SELECT ranked, sources FROM evaluations WHERE id=?", (evaluation,)
        ).fetchone()
        assert ranked == 1
        assert sources


def test_written_registry_round_trips_a_board(store, tmp_path):
    from suites_support import evidence, road_test

    from vbstore.suites import build, push_suite, record

    suite = push_suite(store, road_test())[0]
    record(store, build(suite, **evidence()), recorded=1.0)
    path = reference.write_registry(store, tmp_path / "r.db")
    text = reference.render(path)
    assert "**road-test@1** — Road test" in text
    assert (
        "| 1 | model-a | pretrained | observed | 0.7500 | 0.8000 | 0.7000 | night 0.7000 | 0.0500 "
        "| 1 |" in text
    )


def test_a_reused_work_store_indexes_its_boards_anew(store, tmp_path):
    """``build --work``: a changed protocol is a new suite, not a conflict, and the registry
    holds only this build's evaluations (attempts as a cold build counts them); the stored
    objects stay for the next build to reuse."""
    from suites_support import evidence, road_test

    from vbstore.suites import build, push_suite, record

    suite = push_suite(store, road_test())[0]
    first = record(store, build(suite, **evidence()), recorded=1.0)
    reference._forget_boards(store)
    changed = road_test(params={"lr": 0.01})
    suite = push_suite(store, changed)[0]  # without the reset: SuiteConflict
    record(store, build(suite, **evidence(day=0.6, protocol={
        "task": "segmentation", "params": {"lr": 0.01}})), recorded=2.0)
    text = reference.render(reference.write_registry(store, tmp_path / "r.db"))
    assert ("| 1 | model-a | pretrained | observed | 0.6500 | 0.6000 | 0.7000 | day 0.6000 | "
            "0.0500 | 1 |") in text
    assert "0.7500" not in text
    assert first.id is not None
    assert store.has(first.id)


def test_build_command_takes_a_work_directory_and_refuses_other_flags(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(reference, "build", lambda path, work=None, progress=False:
                        calls.append((path, work)))
    assert reference.main(["build", "r.db", "--work", str(tmp_path)]) == 0
    assert reference.main(["build", "r.db"]) == 0
    assert calls == [("r.db", str(tmp_path)), ("r.db", None)]
    assert reference.main(["build", "r.db", "--wrk", str(tmp_path)]) == 2
    assert reference.main(["build", "r.db", "--work"]) == 2


def _registry():
    return sqlite3.connect(f"file:{ROOT / 'registry.db'}?mode=ro", uri=True)


def test_registry_has_multi_condition_and_dense_suites_with_weakest_and_gap():
    conn = _registry()
    multi = conn.execute(
        "SELECT ref FROM suites WHERE json_array_length(document, '$.protocol.conditions') >= 2"
    ).fetchall()
    assert multi
    for (ref,) in multi:
        rows = conn.execute(
            "SELECT headline, conditions, weakest, weakest_value, gap FROM board_rows "
            "WHERE suite=? AND evidence='observed'",
            (ref,),
        ).fetchall()
        assert rows
        for headline, conditions, weakest, weakest_value, gap in rows:
            values = json.loads(conditions)
            assert len(values) >= 2
            assert headline == pytest.approx(sum(values.values()) / len(values))
            assert (weakest, weakest_value) == min(values.items(), key=lambda kv: (kv[1], kv[0]))
            assert gap == pytest.approx(headline - weakest_value)
    dense = conn.execute(
        "SELECT COUNT(*) FROM board_rows b JOIN suites s ON s.ref = b.suite "
        "WHERE s.task='semantic_segmentation' AND b.evidence='observed' AND b.weights='pretrained'"
    ).fetchone()[0]
    assert dense == 3  # the three EfficientNet-Lites on scenes


def test_the_corpus_has_one_suite_per_probe_with_the_lites_ranked_and_baselines_beside():
    from vbstore.tasks import get_task, list_tasks

    conn = _registry()
    observed = dict(conn.execute(
        "SELECT task, COUNT(*) FROM suites s WHERE EXISTS (SELECT 1 FROM evaluations e "
        "WHERE e.suite = s.ref AND e.evidence = 'observed') GROUP BY task"
    ).fetchall())
    from vbstore.suites._corpus import NOT_IN_CORPUS

    ran = [task for task in list_tasks() if task not in NOT_IN_CORPUS]
    assert set(NOT_IN_CORPUS) <= set(list_tasks())  # a name left behind by a renamed task fails
    assert observed == {task: 1 for task in ran}  # one suite each
    readme = (ROOT / "README.md").read_text()
    for task in NOT_IN_CORPUS:  # the README says which probes are missing, and why
        assert f"`{task}`" in readme
    for task in ran:
        ref, weights = conn.execute(
            "SELECT ref, coalesce(json_extract(document, '$.vbstore.weights'), "
            "json_extract(document, '$.protocol.weights')) FROM suites WHERE task=? "
            "AND ref LIKE 'ref-%'", (task,),
        ).fetchone()
        labels = {label for (label,) in conn.execute(
            "SELECT label FROM board_rows WHERE suite=?", (ref,))}
        unranked = conn.execute(
            "SELECT label, weights, reasons FROM evaluations WHERE suite=? AND ranked=0",
            (ref,),
        ).fetchall()
        # a CLIP model (a text tower, or encode_image's embeddings): the random-weight CLIP
        if get_task(task).shape in ("text", "embedding"):
            assert weights == "random"
            assert len(labels) == 1
            continue
        assert weights == "pretrained"
        assert labels == {"efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2"}
        # the baselines: evaluated on the same suite, refused a rank for their weights only
        assert sorted(w for _, w, _ in unranked) == ["fixed", "random", "random"], task
        assert all(json.loads(r) == [f"weights({w})"] for _, w, r in unranked), task
        assert f"**{ref}**" in readme
    assert "| - | test_pixels | fixed | observed |" in readme
    for title in ("#### High-level probes", "#### Mid-level probes", "#### Low-level probes"):
        assert title in readme


def test_reported_figures_are_the_published_ones_never_beside_observed_ranks():
    conn = _registry()
    reported = dict(
        conn.execute(
            "SELECT b.suite, b.headline FROM board_rows b WHERE b.evidence='reported' "
            "AND b.suite NOT LIKE 'openclip-%'"
        ).fetchall()
    )
    # VisBench's README figures as PROTOCOLS.md transcribes them (2.1, 2.3)
    assert reported == {"imagenette-linear@1": 0.9939, "voc-semseg@1": 0.733}
    for suite in reported:
        rows = conn.execute("SELECT evidence FROM evaluations WHERE suite=?", (suite,))
        kinds = {e for (e,) in rows}
        assert kinds == {"reported"}
    for missing, notes, file in conn.execute(
        "SELECT missing, notes, file FROM reported WHERE suite NOT LIKE 'openclip-%'"
    ):
        assert json.loads(missing) == ["data", "evaluator"]
        assert "VisBench 0.11 README" in notes
        assert (ROOT / "suites" / "reference" / file).is_file()
    readme = (ROOT / "README.md").read_text()
    assert (
        "| 1 | dinov2_vits14 | pretrained | reported (no manifest, unknown evaluator) | 0.9939 |"
        in readme
    )
    observed_part, _, reported_part = readme.partition("### Reported")
    assert "reported (" not in observed_part
    assert "| observed |" not in reported_part


def test_open_clip_boards_hold_the_published_cells_as_reported():
    import csv

    from vbstore.suites._openclip import COMMIT, DATASETS

    conn = _registry()
    boards = {s for (s,) in conn.execute(
        "SELECT DISTINCT suite FROM board_rows WHERE suite LIKE 'openclip-%'")}
    assert len(boards) == 33  # 31 classification datasets with a known size, 2 retrieval
    b32 = conn.execute("SELECT rank, value, evidence FROM boards WHERE "
                       "suite='openclip-imagenet1k@1' AND label='open_clip:ViT-B-32@openai'"
                       ).fetchone()
    assert b32 == (77, 0.6332, "reported")
    assert conn.execute("SELECT COUNT(*) FROM board_rows WHERE suite='openclip-imagenet1k@1'"
                        ).fetchone() == (121,)
    assert conn.execute("SELECT COUNT(*) FROM board_rows WHERE suite='openclip-wilds-fmow@1'"
                        ).fetchone() == (90,)  # 31 cells of 0.0000: not evaluated
    published = {}
    for table in ("openclip_results.csv", "openclip_retrieval_results.csv"):
        with (ROOT / "suites" / "reference" / table).open(newline="") as handle:
            for row in csv.DictReader(handle):
                published[table, row["name"], row["pretrained"]] = row
    head = {d.ref: (d, next(iter(d.metrics().values()))) for d in DATASETS}
    rows = conn.execute("SELECT b.suite, b.label, b.headline, e.sources, e.missing FROM "
                        "board_rows b JOIN evaluations e ON e.id = b.evaluation "
                        "WHERE b.suite LIKE 'openclip-%'").fetchall()
    assert len(rows) == 33 * 121 - 31
    for suite, label, value, sources, missing in rows:
        source = json.loads(sources)["test"]
        assert source["commit"] == COMMIT
        assert json.loads(missing) == ["data", "protocol", "evaluator"]
        model, pretrained = label.removeprefix("open_clip:").rsplit("@", 1)
        cell = published[source["file"], model, pretrained][head[suite][1]]
        assert value == float(cell)
    readme = (ROOT / "README.md").read_text()
    assert ("| 77 | open_clip:ViT-B-32@openai | pretrained | reported (no manifest, unknown "
            "protocol, unknown evaluator) | 0.6332 |") in readme


@pytest.mark.slow  # imports the 3962 published figures (a minute on a loaded machine)
def test_reported_boards_are_refreshed_without_recomputing(tmp_path):
    """``reported registry.db``: the observed boards stay as they are, the reported ones are
    those a full build writes (the same clock)."""
    import shutil

    copy = tmp_path / "r.db"
    shutil.copy(ROOT / "registry.db", copy)
    conn = sqlite3.connect(copy)
    conn.execute("DELETE FROM board_rows WHERE suite LIKE 'openclip-%'")
    conn.execute("UPDATE evaluations SET label='x' WHERE suite='imagenette-linear@1'")
    conn.commit()
    conn.close()
    reference.refresh_reported(copy)
    query = ("SELECT suite, rank, label, value FROM boards ORDER BY suite, rank, label")
    fresh, kept = sqlite3.connect(copy), _registry()
    assert fresh.execute(query).fetchall() == kept.execute(query).fetchall()
    query = "SELECT * FROM evaluations ORDER BY id"
    assert fresh.execute(query).fetchall() == kept.execute(query).fetchall()


def test_views_browse_results_evaluations_and_boards():
    conn = _registry()
    views = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='view'")}
    assert {"results_v", "evaluations_v", "evaluation_scores", "reported", "boards"} <= views
    for view in views:
        assert conn.execute(f"SELECT COUNT(*) FROM {view}").fetchone()[0] > 0  # noqa: S608
    # one score row per evaluation, condition and suite metric
    expected = sum(
        len(json.loads(c)) * len(json.loads(m))
        for c, m in conn.execute(
            "SELECT json_extract(s.document, '$.protocol.conditions'), "
            "json_extract(s.document, '$.protocol.metrics') FROM evaluations e "
            "JOIN suites s ON s.ref = e.suite"
        )
    )
    assert conn.execute("SELECT COUNT(*) FROM evaluation_scores").fetchone()[0] == expected
