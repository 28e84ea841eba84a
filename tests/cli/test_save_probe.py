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
    assert "trains no head (zero_shot probe), so there is none to save" in out.output
    assert not path.exists()
    assert json.loads(run("ls", "result", "--json").stdout) == []


def test_save_probe_with_several_seeds_is_refused(run, shapes, tmp_path):
    out = run("run", "classification", *TINY, "-d", shapes, "--split", "val", "--train-data",
              shapes, "--train-split", "train", "--seeds", "2", "--save-probe",
              str(tmp_path / "p.safetensors"))
    assert out.exit_code == 2
    assert "one per seed" in out.output


def test_no_cache_is_a_cold_run_that_leaves_the_store_as_it_was(run, shapes, tmp_path):
    """VisBench's --no-cache: nothing read from or kept in the store; the numbers the same."""
    warm = json.loads(run("run", "retrieval", *TINY, "-d", shapes, "--split", "val",
                          "--json").stdout)
    before = json.loads(run("ls", "--json").stdout)
    out = tmp_path / "r.jsonl"
    cold = run("run", "retrieval", *TINY, "-d", shapes, "--split", "val", "--no-cache",
               "--results", str(out), "--json")
    assert cold.exit_code == 0, cold.output
    answer = json.loads(cold.stdout)
    assert answer["features"]["eval"]["extracted"] > 0  # nothing was read from a cache
    assert answer["record"]["metrics"] == warm["record"]["metrics"]
    assert answer["id"] == warm["id"]  # the same question, the same id
    assert json.loads(run("ls", "--json").stdout) == before  # nothing was written
    assert len(out.read_text().splitlines()) == 1
    refused = run("run", "retrieval", *TINY, "-d", shapes, "--split", "val", "--no-cache",
                  "--notes", "x")
    assert refused.exit_code == 2


def test_push_to_sends_the_trained_head_to_a_remote_and_it_pulls_against_its_backbone(
        tmp_path, shapes):
    """VisBench's --push-to: the head this run trains, named probes/TASK/RESULT, pushed to a
    configured remote; another store pulls it and applies it to the same backbone."""
    from click.testing import CliRunner

    from vbstore.cli import cli

    def vb(store, *args):
        return CliRunner().invoke(cli, ["--store", str(tmp_path / store), *args])

    for store in ("a", "b"):
        assert vb(store, "remote", "add", "team", str(tmp_path / "team")).exit_code == 0
    data = ["-d", shapes, "--split", "val", "--train-data", shapes, "--train-split", "train"]
    out = vb("a", "run", "classification", *TINY, *data, "--epochs", "3", "--push-to", "team",
             "--json")
    assert out.exit_code == 0, out.output
    record = json.loads(out.stdout)
    name = f"probes/classification/{record['id'][:12]}"
    assert f"as {name} to team" in out.stderr
    pulled = vb("b", "pull", f"team/{name}", "--json")
    assert pulled.exit_code == 0, pulled.output
    applied = vb("b", "run", "classification", *TINY, "-d", shapes, "--split", "val",
                 "--head", name, "--json")
    assert applied.exit_code == 0, applied.output
    assert json.loads(applied.stdout)["record"]["metrics"] == record["record"]["metrics"]


def test_push_to_is_refused_before_anything_runs(run, shapes):
    data = ["-d", shapes, "--split", "val", "--train-data", shapes, "--train-split", "train"]
    unknown = run("run", "classification", *TINY, *data, "--push-to", "nowhere")
    assert unknown.exit_code == 2
    assert "--push-to nowhere: no such remote" in unknown.output
    zero_shot = run("run", "retrieval", *TINY, "-d", shapes, "--split", "val", "--push-to", "x")
    assert zero_shot.exit_code == 2
    assert "trains no head" in zero_shot.output
    assert json.loads(run("ls", "result", "--json").stdout) == []


def test_no_cache_with_push_to_names_the_conflict_not_a_missing_remote(run, shapes, tmp_path):
    """--no-cache computes in a scratch store, which has none of this store's remotes: a
    configured remote was refused as "no such remote"; the two flags are refused together."""
    assert run("remote", "add", "team", str(tmp_path / "team")).exit_code == 0
    data = ["-d", shapes, "--split", "val", "--train-data", shapes, "--train-split", "train"]
    out = run("run", "classification", *TINY, *data, "--no-cache", "--push-to", "team")
    assert out.exit_code == 2
    assert "no such remote" not in out.output
    assert "--no-cache" in out.output
    assert "--push-to" in out.output
    assert not (tmp_path / "team").exists() or not any((tmp_path / "team").rglob("*.safetensors"))


def test_public_without_push_to_is_refused_not_ignored(run, shapes):
    """--public only says who may read what --push-to sends: alone it was dropped unseen and
    the run went on; now it is refused before anything runs, with the usage exit code."""
    data = ["-d", shapes, "--split", "val", "--train-data", shapes, "--train-split", "train"]
    for extra in ([], ["--no-cache"]):
        out = run("run", "classification", *TINY, *data, "--public", *extra)
        assert out.exit_code == 2, out.output
        assert "--public" in out.output
        assert "--push-to" in out.output
    assert json.loads(run("ls", "result", "--json").stdout) == []
