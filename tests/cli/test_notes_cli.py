"""``--notes TEXT`` on ``run`` and ``get result``: VisBench's free text, kept in the registry
(never in the hashed record, never in the id), shown by ``show``, ``why`` and exports."""

import json

TINY = ["-b", "test_cnn", "--weights", "random", "--input-size", "32"]


def test_notes_attach_to_the_stored_result_without_computing_again(run, shapes):
    get = ["get", "result", *TINY, "-t", "retrieval", "-d", shapes, "--split", "val", "--json"]
    plain = json.loads(run(*get).stdout)
    noted = run(*get, "--notes", "rerun for the paper")
    assert noted.exit_code == 0, noted.output
    answer = json.loads(noted.stdout)
    assert (answer["id"], answer["from_cache"]) == (plain["id"], True)
    assert "notes" not in answer["record"] or answer["record"]["notes"] is None
    later = run("run", "retrieval", *TINY, "-d", shapes, "--split", "val", "--notes",
                "second look", "--json")
    assert json.loads(later.stdout)["id"] == plain["id"]
    shown = json.loads(run("show", plain["id"], "--json").stdout)
    assert shown["notes"] == ["second look", "rerun for the paper"]
    assert "notes: second look" in run("show", plain["id"]).output
    why = json.loads(run("why", plain["id"], "--json").stdout)
    assert why["notes"] == ["second look", "rerun for the paper"]
    tree = run("why", plain["id"]).output.splitlines()
    assert tree[1:3] == ["notes: second look", "notes: rerun for the paper"]
    rows = json.loads(run("export", "results", "--format", "jsonl").stdout.splitlines()[0])
    assert rows["notes"] == "second look; rerun for the paper"
    # the same command line with notes again: attached again (newest), never the cache's alone
    run(*get, "--notes", "rerun for the paper")
    again = json.loads(run("show", plain["id"], "--json").stdout)
    assert again["notes"] == ["rerun for the paper", "second look"]
