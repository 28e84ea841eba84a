import json
import os
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from vbstore.cli import cli


@pytest.fixture
def run(tmp_path):
    runner = CliRunner()
    store = str(tmp_path / "s")

    def invoke(*args, input=None):
        return runner.invoke(cli, ["--store", store, *args], input=input)

    return invoke


def suite_json(slug: str, version) -> str:
    """A minimal suite document: knn on external data, one condition, one headline metric."""
    return json.dumps({"kind": "suite", "slug": slug, "name": slug, "version": version,
                       "protocol": {"task": "knn", "data": {"kind": "external"},
                                    "conditions": [{"name": "val", "sampleCount": 2}],
                                    "metrics": [{"key": "top1", "headline": True}]}})


def test_every_command_has_help_text():
    def walk(group, prefix):
        for name, command in group.commands.items():
            assert command.help, f"{prefix} {name} has no help"
            assert command.help.strip(), f"{prefix} {name} has no help"
            if isinstance(command, click.Group):
                walk(command, f"{prefix} {name}")

    walk(cli, "vbstore")


def test_every_command_takes_json():
    def walk(group):
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                walk(command)
            elif name != "cat":  # cat writes raw bytes by definition
                assert any("--json" in p.opts for p in command.params), name

    walk(cli)


def test_put_show_ls_tag_why_cat(run, tmp_path):
    doc = tmp_path / "suite.json"
    doc.write_text(suite_json("demo", 1))
    result = run("put", str(doc), "--json")
    assert result.exit_code == 0, result.output
    oid = json.loads(result.output)["id"]
    assert json.loads(result.output)["kind"] == "suite"
    assert run("tag", "my-suite", oid[:8]).exit_code == 0
    same = run("tag", "my-suite", oid[:8])
    assert "moved" not in same.output
    (tmp_path / "other.txt").write_text("other")
    other = json.loads(run("put", str(tmp_path / "other.txt"), "--json").output)["id"]
    moved = run("tag", "my-suite", other[:8])
    assert f"my-suite -> {other[:12]} (moved from {oid[:12]})" in moved.output
    assert json.loads(run("tag", "my-suite", oid[:8], "--json").output)["previous"] == other
    unset = run("tag", "", oid[:8])  # `vbstore tag "$NAME" ID` with NAME unset: not a listing
    assert unset.exit_code == 2
    assert "my-suite" not in unset.output
    shown = json.loads(run("show", "my-suite", "--json").output)
    assert shown["content"]["name"] == "demo"
    assert shown["refs"] == ["my-suite"]
    listing = json.loads(run("ls", "suite", "--json").output)
    assert [row["id"] for row in listing] == [oid]
    assert "demo@1 demo" in run("ls").output
    assert json.loads(run("cat", oid).output)["name"] == "demo"
    tree = json.loads(run("why", oid, "--json").output)
    assert tree["id"] == oid
    assert tree["kind"] == "suite"


def test_why_prints_lineage(run, tmp_path):
    from vbstore import Store
    from vbstore.store import derivation_spec

    with Store(tmp_path / "s") as s:
        a = s.put_bytes(b"image")
        m = s.put_json({"layout": "folder", "split": "val", "samples": [{"image": a}]}, "manifest",
                       edges={"image": a})
        r = s.put_json({"task": "knn", "op_version": 1, "metrics": {"top1": 0.5}, "params": {},
                        "inputs": {"manifest": m}}, "result")
        s.record(derivation_spec("result", 1, {"manifest": m}, {}), r)
    out = run("why", r[:10]).output
    assert f"result {r[:12]} (result v1, computed)  knn: top1=0.5" in out  # and its origin
    assert f"manifest: manifest {m[:12]}" in out
    assert f"image: blob {a[:12]}" in out


def test_errors_are_one_line_with_documented_exit_codes(run, tmp_path):
    result = run("show", "deadbeef")
    assert result.exit_code == 9
    assert result.output.strip().count("\n") == 0
    assert result.output.startswith("error: no object matches 'deadbeef'")
    bad = tmp_path / "bad.json"
    # Visin's suites have integer versions: a string version is refused, naming the field
    bad.write_text(suite_json("x", "1"))
    result = run("put", str(bad))
    assert result.exit_code == 2
    assert "at version" in result.output


def test_json_errors_are_one_json_object(run, tmp_path):
    result = run("show", "deadbeef", "--json")
    assert result.exit_code == 9
    error = json.loads(result.stdout)
    assert error == {"error": "no object matches 'deadbeef'",
                     "hint": "list objects with: vbstore ls",
                     "exit_code": 9, "type": "ObjectNotFound"}
    usage = run("gc", "--max-size", "lots", "--json")  # a click usage error too
    assert usage.exit_code == 2
    assert json.loads(usage.stdout)["exit_code"] == 2
    assert "lots" in json.loads(usage.stdout)["error"]
    suite = tmp_path / "suite.json"
    suite.write_text(suite_json("x", 1))
    oid = run("put", str(suite)).output.strip()
    from vbstore import Store

    with Store(tmp_path / "s") as s:
        path = s.files.path(oid)
    os.chmod(path, 0o644)
    path.write_bytes(path.read_bytes().replace(b'"x"', b'"y"'))
    corrupt = json.loads(run("show", oid, "--json").stdout)
    assert corrupt["exit_code"] == 10
    assert "fsck --repair" in corrupt["hint"]


def test_fsck_exit_code_and_gc_dry_run(run, tmp_path):
    oid = run("put", "-", input="payload").output.strip()
    assert run("fsck").exit_code == 0
    dry = json.loads(run("gc", "--grace", "0", "--dry-run", "--json").output)
    assert dry["removed"][0]["id"] == oid
    totals = json.loads(run("gc", "--grace", "0", "--dry-run", "--json", "--summary").output)
    assert "removed" not in totals
    assert totals["removed_by_kind"] == {"blob": {"count": 1, "bytes": len("payload")}}
    dry = run("gc", "--grace", "0", "--dry-run").output
    assert "would remove 1 unreachable objects, evict 0, free " in dry
    from vbstore import Store

    with Store(tmp_path / "s") as s:
        path = s.files.path(oid)
    os.chmod(path, 0o644)
    path.write_bytes(b"tampered")
    result = run("fsck")
    assert result.exit_code == 1
    assert "CORRUPT" in result.output
    assert run("cat", oid).exit_code == 10
    usage = json.loads(run("du", "--json").output)
    assert usage["kinds"]["blob"]["count"] == 1
    assert run("gc", "--max-size", "lots").exit_code == 2


def test_show_says_evicted_only_while_the_blob_is_gone(run, tmp_path):
    oid = run("put", "-", input="payload").output.strip()
    from vbstore import Store

    with Store(tmp_path / "s") as s:
        path = s.files.path(oid)
    os.chmod(path, 0o644)
    path.write_bytes(b"tampered")
    repair = run("fsck", "--repair")
    assert f"moved aside {oid[:12]}" in repair.output
    gone = run("show", oid)
    assert "EVICTED" in gone.output  # moved aside, no remote: really gone
    # a put blob is no derivation's output: nothing would make it again
    assert "not recomputable: put, push or pull it again" in gone.output
    assert json.loads(run("show", oid, "--json").output)["present"] is False
    path.write_bytes(b"payload")  # the user puts the good bytes back...
    again = run("fsck", "--repair")
    assert again.exit_code == 0, again.output
    shown = run("show", oid)
    assert "EVICTED" not in shown.output, shown.output  # ...and it is present, verified
    assert "verified -" not in shown.output
    assert f"present again {oid[:12]}" in again.output
    info = json.loads(run("show", oid, "--json").output)
    assert info["present"] is True
    assert info["evicted_at"] is None
    assert "(evicted)" not in run("ls").output
    usage = json.loads(run("du", "--json").output)["kinds"]["blob"]
    assert usage["bytes"] == len("payload")
    assert "present again" not in run("fsck").output  # told once: the row is right now


def test_debug_shows_traceback(tmp_path):
    env = dict(os.environ, VBSTORE_DEBUG="1", VBSTORE_HOME=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "vbstore", "show", "abcdef"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr


def test_cli_does_not_import_torch():
    code = "import sys, vbstore.cli; vbstore.cli.cli(['--help'], standalone_mode=False); " \
           "print(sorted(m for m in ('torch', 'timm', 'open_clip') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip().endswith("[]"), proc.stdout + proc.stderr


def test_a_registered_object_whose_blob_is_gone_says_so_and_what_to_do(run, tmp_path):
    (tmp_path / "f.txt").write_text("payload")
    oid = json.loads(run("put", str(tmp_path / "f.txt"), "--json").output)["id"]
    blob = tmp_path / "s" / "objects" / oid[:2] / oid[2:]
    blob.unlink()  # a disk error, a stray rm: `ls` still lists the row
    assert oid[:12] in run("ls").output
    shown = run("show", oid)
    assert shown.exit_code == 0
    assert "MISSING" in shown.output
    assert "fsck --repair" in shown.output
    for args in (("cat", oid), ("cat", oid[:8])):
        read = run(*args)
        assert read.exit_code == 9, read.output
        line = read.output.strip()
        assert "\n" not in line
        # not "no object matches ... list objects with: vbstore ls", which lists it
        assert "missing" in line
        assert "fsck --repair" in line
        assert "vbstore ls" not in line


def test_show_says_how_an_evicted_object_comes_back(tmp_path, run):
    import torch

    from vbstore import Store
    from vbstore.data import load_manifest, make_shapes

    shapes = make_shapes(tmp_path / "shapes", per_class=1, size=16)
    with Store(tmp_path / "s") as s:
        made = load_manifest(s, shapes, split="val").id  # read from files: a get remakes it
        given = s.put_tensors({"w": torch.ones(4)}, kind="tensors")  # handed in: nothing does
        paths = [s.files.path(oid) for oid in (made, given)]
    for path in paths:
        os.chmod(path, 0o644)
        path.write_bytes(b"tampered")
    repair = run("fsck", "--repair").output  # both moved aside, kept as evicted rows
    assert f"moved aside {made[:12]}" in repair
    assert f"moved aside {given[:12]}" in repair
    assert "EVICTED (recomputable: the command that made it makes it again)" in \
        run("show", made).output
    assert "EVICTED (not recomputable: put, push or pull it again)" in \
        run("show", given).output


def test_ls_results_names_backbone_and_data(run, tmp_path):
    import json

    from vbstore.data import make_shapes

    shapes = str(make_shapes(tmp_path / "shapes", per_class=2, seed=1, size=32))
    args = ["get", "result", "-b", "test_cnn", "--weights", "random", "-d", shapes, "--split",
            "val", "--train-data", shapes, "--train-split", "train", "-t"]
    assert run(*args, "knn", "-p", "k=3").exit_code == 0
    assert run(*args, "knn", "-p", "k=3", "--split", "train").exit_code == 0
    text = run("ls", "results").output
    assert "knn on test_cnn (random)  shapes val (10) <- shapes train (10): " in text
    assert "knn on test_cnn (random)  shapes train (10) <- shapes train (10): " in text
    rows = json.loads(run("ls", "results", "--json").output)
    assert {(r["backbone"], r["weights"]) for r in rows} == {("test_cnn", "random")}
    assert all(len(r["eval_manifest"]) == 64 for r in rows)


def test_ls_results_tells_a_requested_pooling_from_the_backbones_own(run, tmp_path):
    from vbstore.data import make_shapes

    shapes = str(make_shapes(tmp_path / "shapes", per_class=2, seed=1, size=32))
    args = ["get", "result", "-b", "test_vit", "--weights", "random", "-d", shapes, "--split",
            "val", "--train-data", shapes, "--train-split", "train", "-t", "knn", "-p", "k=3"]
    assert run(*args).exit_code == 0
    assert run(*args, "--pooling", "cls").exit_code == 0  # its own: the same result
    assert run(*args, "--pooling", "mean").exit_code == 0
    lines = [line for line in run("ls", "results").output.splitlines() if " knn on " in line]
    assert len(lines) == 2
    assert sum("knn on test_vit (random)  " in line for line in lines) == 1
    assert sum("knn on test_vit (random, pooling=mean)  " in line for line in lines) == 1
