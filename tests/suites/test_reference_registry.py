import sqlite3
from pathlib import Path

from vbstore.suites import reference

ROOT = Path(__file__).resolve().parents[2]


def test_readme_tables_are_generated_from_registry_db():
    readme = (ROOT / "README.md").read_text()
    tables = reference.render(ROOT / "registry.db")
    assert reference.splice(readme, tables) == readme, (
        "README tables drifted from registry.db: run `make registry` "
        "(or python -m vbstore.suites.reference readme README.md registry.db)"
    )


def test_registry_db_is_self_consistent_and_never_ranks_random_with_pretrained():
    conn = sqlite3.connect(f"file:{ROOT / 'registry.db'}?mode=ro", uri=True)
    boards = conn.execute("SELECT suite, weights FROM boards").fetchall()
    assert boards  # the README has something to show
    for suite, weights in boards:
        protocol = conn.execute(
            "SELECT json_extract(document, '$.protocol.weights') FROM suites WHERE ref=?", (suite,)
        ).fetchone()[0]
        assert (weights == "random") == (protocol == "random")
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
    assert (
        "**road-test@1** — Road test" in text
    )
    assert (
        "| 1 | model-a | pretrained | observed | 0.7500 | night 0.7000 | 0.0500 | 1 |" in text
    )
