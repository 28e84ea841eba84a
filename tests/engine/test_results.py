import json
import subprocess
import sys

import pytest

import vbstore
from vbstore.errors import UsageError

KW = dict(split="val", train_split="train", weights="random", input_size=32, progress=False)
QUICK = {"epochs": 10}  # classification's 200-epoch default is not what these tests test


def test_cached_result_and_second_task_share_features(store, shapes, forwards):
    first = vbstore.get_result("test_cnn", "classification", shapes, shapes, store=store, **KW)
    assert not first.from_cache
    assert set(first.metrics) == {"top1"}  # five classes: no top5 (VisBench's rule)
    assert 0 <= first.metrics["top1"] <= 1
    assert "train_top1" in first.record.train_metrics
    assert first.record.weights_kind == "random"
    assert first.record.versions["torch"]
    assert first.run.device.startswith("cpu")  # the run log, not the hashed record
    assert first.record.device is None
    assert first.record.timings is None
    for key in ("backbone", "weights", "eval_manifest", "train_manifest", "eval_features",
                "train_features", "head"):
        assert key in first.record.inputs, key
    forwards.clear()
    again = vbstore.get_result("test_cnn", "classification", shapes, shapes, store=store, **KW)
    assert again.from_cache
    assert again.id == first.id
    assert forwards == []
    knn = vbstore.get_result("test_cnn", "knn", shapes, shapes, store=store, params={"k": 5}, **KW)
    assert forwards == []
    assert knn.run.features_from_cache
    assert knn.record.params["k"] == 5


def test_result_lineage_reaches_weights_and_manifests(store, shapes):
    from vbstore.engine import lineage

    result = vbstore.get_result("test_vit", "retrieval", shapes, store=store, split="val",
                                weights="random", input_size=32, progress=False)
    tree = lineage(store, result.id)
    kinds = set()

    def walk(node):
        kinds.add(node["kind"])
        for child in node.get("inputs", []):
            walk(child)

    walk(tree)
    assert {"result", "backbone", "weights", "manifest", "featureset", "pack"} <= kinds


def test_data_argument_errors(store, shapes):
    with pytest.raises(UsageError, match=r"zero-shot.*drop train_data="):
        vbstore.get_result("test_cnn", "retrieval", shapes, shapes, store=store, **KW)
    with pytest.raises(UsageError, match="train_data="):
        vbstore.get_result("test_cnn", "classification", shapes, store=store, split="val",
                           weights="random", progress=False)
    with pytest.raises(UsageError, match="k"):
        vbstore.get_result("test_cnn", "knn", shapes, shapes, store=store, params={"k": -1}, **KW)
    assert store.ls("result") == []


def test_seeds_aggregate_and_recompute(store, shapes):
    result = vbstore.get_result("test_cnn", "classification", shapes, shapes, store=store,
                                seeds=3, params=QUICK, **KW)
    agg = result.record.aggregate["top1"]
    assert agg["n"] == 3
    assert agg["ci_low"] <= agg["mean"] <= agg["ci_high"]
    assert result.record.seeds == [0, 1, 2]
    assert len(result.record.inputs) >= 9
    again = vbstore.get_result("test_cnn", "classification", shapes, shapes, store=store, seeds=3,
                               params=QUICK, recompute=True, **KW)
    assert again.reproduced["previous"] == result.id
    assert again.reproduced["reproduced"], again.reproduced


# Forks N processes that each run the command line given after N, at once, and prints each
# one's exit status and output as a JSON list. The libraries they compute with are imported
# once, before the fork (the store is not opened): each process pays its own computation, not
# its own `import torch` (four of those were most of this test's time).
CONCURRENTLY = """
import json, os, sys
import torch  # noqa: F401 - imported before the fork, not by each process
import vbstore.cli, vbstore.engine._compute, vbstore.backbones  # noqa: F401 - as torch
count, args = int(sys.argv[1]), sys.argv[2:]
children = []
for _ in range(count):
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        code = 0
        try:
            vbstore.cli.main(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    os.close(out_w)
    os.close(err_w)
    children.append((pid, out_r, err_r))
done = []
for pid, out_r, err_r in children:
    with os.fdopen(out_r) as out, os.fdopen(err_r) as err:
        text, error = out.read(), err.read()
    done.append([os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), text, error])
print(json.dumps(done))
"""


def test_concurrent_processes_compute_a_result_once(tmp_path, shapes):
    args = ["--store", str(tmp_path), "get", "result",
            "-b", "test_cnn", "-t", "classification", "-d", shapes, "--split", "val",
            "--train-data", shapes,
            "--train-split", "train", "--weights", "random", "--input-size", "32", "-p",
            "epochs=10", "--json"]
    launched = subprocess.run([sys.executable, "-c", CONCURRENTLY, "4", *args],
                              capture_output=True, text=True, timeout=300, check=True)
    outs = [(out, err) for _, out, err in json.loads(launched.stdout)]
    assert [code for code, _, _ in json.loads(launched.stdout)] == [0] * 4, [e for _, e in outs]
    answers = [json.loads(out) for out, _ in outs]
    assert len({a["id"] for a in answers}) == 1
    assert sorted(a["from_cache"] for a in answers) == [False, True, True, True]
    assert len({json.dumps(a["record"], sort_keys=True) for a in answers}) == 1


# what a cached answer must not load: the heavy libraries, the compute path, remotes, the schema
# validator, thread pools (measured in benchmarks/engine_bench.py; docs/architecture.md)
UNREAD = ("torch", "timm", "open_clip", "numpy", "PIL", "sqlite_utils", "jsonschema",
          "concurrent.futures", "urllib.request", "vbstore.heads", "vbstore.remotes",
          "vbstore.engine._compute", "vbstore.engine._toolbox", "vbstore.engine._sweep",
          "vbstore.tasks.bootstrap",
          # loaded by name or when their data or flags are used (the cached path is timed)
          "logging", "vbstore.features._executor", "vbstore.tasks.detection",
          "vbstore.tasks.correspondence", "vbstore.data._boxes", "vbstore.data._sources",
          "vbstore.data._lists", "vbstore.backbones._catalog", "vbstore.backbones._cfg")


def test_cli_cached_result_does_not_import_torch(tmp_path, shapes):
    args = ["--store", str(tmp_path), "get", "result", "-b", "test_cnn", "-t", "knn", "-d", shapes,
            "--split", "val", "--train-data", shapes, "--train-split", "train",
            "--weights", "random", "--input-size", "32", "--json"]
    import time

    from click.testing import CliRunner

    from vbstore.cli import cli
    from vbstore.store import RACY_SECONDS

    time.sleep(2 * RACY_SECONDS)  # the data older than the racy window: its listing is kept
    first = CliRunner().invoke(cli, args)  # computed here: the process under test is the next
    assert first.exit_code == 0, first.output
    code = (f"import sys, json, vbstore.cli\nUNREAD = {UNREAD!r}\n"
            "try:\n    vbstore.cli.cli(sys.argv[1:], standalone_mode=False)\n"
            "finally:\n    print(json.dumps(sorted(m for m in UNREAD if m in sys.modules)))")
    second = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    out = second.stdout
    record, imported = json.loads(out[: out.rindex("[")]), json.loads(out[out.rindex("["):])
    assert record["from_cache"]
    assert imported == []
    assert record["id"] == json.loads(first.stdout)["id"]


def test_a_cached_result_writes_nothing_and_a_miss_touches_its_inputs(store, shapes,
                                                                       monkeypatch):
    from vbstore.engine import plan, result_request
    from vbstore.store._registry import Registry

    first = vbstore.get_result("test_cnn", "knn", shapes, shapes, store=store, **KW)
    writes = []
    real = Registry.write
    monkeypatch.setattr(Registry, "write", lambda self: writes.append(1) or real(self))
    again = vbstore.get_result("test_cnn", "knn", shapes, shapes, store=store, **KW)
    assert again.from_cache
    assert again.id == first.id
    assert writes == []  # a stored result is a gc root keeping its inputs: no registry write
    inputs = [first.record.inputs[k] for k in ("backbone", "eval_manifest", "train_manifest")]
    before = {oid: store.info(oid).last_used for oid in inputs}
    the_plan = plan(result_request(
        "test_cnn", "knn", shapes, shapes, params={"k": 3}, split="val", train_split="train",
        weights="random", input_size=32), store)
    assert not the_plan.cached
    assert all(store.info(oid).last_used > before[oid] for oid in inputs)  # in use from here on


def test_head_for_another_input_size_is_refused(store, shapes):
    from vbstore.heads import HeadMismatch

    head = vbstore.get_head("test_cnn", "classification", shapes, store=store, train_split="train",
                            weights="random", input_size=32, progress=False)
    assert head.record.input_size == 32
    with pytest.raises(HeadMismatch, match="input_size is 32 in the head, 48 here"):
        vbstore.get_result("test_cnn", "classification", shapes, store=store, split="val",
                           weights="random", input_size=48, head=head.id, progress=False)
    same = vbstore.get_result("test_cnn", "classification", shapes, store=store, split="val",
                              weights="random", input_size=32, head=head.id, progress=False)
    assert same.record.inputs["head"] == head.id
    assert same.record.comparable


def test_get_head_without_a_train_split_names_train_split(store, shapes):
    from vbstore.errors import UsageError

    with pytest.raises(UsageError, match=r"choose one with train_split=$"):
        vbstore.get_head("test_cnn", "classification", shapes, store=store, weights="random",
                         input_size=32, progress=False)


def test_a_head_of_another_task_is_refused_naming_the_task_not_the_backbone(store, shapes):
    from vbstore.heads import HeadMismatch

    head = vbstore.get_head("test_cnn", "classification", shapes, store=store, train_split="train",
                            weights="random", input_size=32, progress=False)
    with pytest.raises(HeadMismatch) as caught:
        vbstore.get_result("test_cnn", "knn", shapes, store=store, split="val",
                           weights="random", input_size=32, head=head.id, progress=False)
    message = str(caught.value)
    assert "task is 'classification' in the head, 'knn' here" in message
    assert "backbone" not in message  # the backbone fits; --no-strict cannot make knn use it
    assert "--no-strict" not in message


def test_backbone_drift_is_refused_once_then_follows_the_new_backbone(store):
    from vbstore.engine import BackboneDrift, resolve_backbone

    seed0 = resolve_backbone(store, "test_cnn", weights="random", seed=0, input_size=32)
    seed1 = resolve_backbone(store, "test_cnn", weights="random", seed=1, input_size=32)
    store.record(seed0.alias, seed1.id)  # as if the spec's weights had changed upstream
    stale = resolve_backbone(store, "test_cnn", weights="random", seed=0, input_size=32)
    assert stale.id == seed1.id
    with pytest.raises(BackboneDrift, match="run the command again"):
        stale.load()
    fresh = resolve_backbone(store, "test_cnn", weights="random", seed=0, input_size=32)
    assert fresh.id == seed0.id


def test_damaged_registry_is_one_clear_error(tmp_path):
    (tmp_path / "registry.db").write_bytes(b"not sqlite at all" * 64)
    proc = subprocess.run([sys.executable, "-m", "vbstore", "--store", str(tmp_path), "ls"],
                          capture_output=True, text=True)
    assert proc.returncode == 7
    assert proc.stderr.count("\n") == 1
    assert "registry.db is damaged" in proc.stderr


def test_head_mismatch_names_both_backbones_by_spec(store, shapes):
    from vbstore.heads import HeadMismatch

    head = vbstore.get_head("test_cnn", "classification", shapes, store=store, train_split="train",
                            weights="random", backbone_seed=0, input_size=32, progress=False)
    with pytest.raises(HeadMismatch) as caught:
        vbstore.get_result("test_cnn", "classification", shapes, store=store, split="val",
                           weights="random", backbone_seed=1, input_size=32, head=head.id,
                           progress=False)
    message = str(caught.value)
    assert "weights is" in message  # the tensor hashes still say what differed
    source = store.read_json(head.record.backbone)["source"]
    assert f"trained on {source}:test_cnn (random weights seed 0, input 32;" in message
    assert f"come from {source}:test_cnn (random weights seed 1, input 32;" in message


def test_one_computation_is_one_result_id_in_any_store(tmp_path, monkeypatch, shapes):
    """Timings, device and feature reuse live in the registry's run log, not in the hashed
    record: the same request in two fresh stores (two VBSTORE_HOMEs) gives one result id, and a
    reproduced --recompute adds a run, not another result object."""
    ids, runs = [], []
    for home in ("a", "b"):
        monkeypatch.setenv("VBSTORE_HOME", str(tmp_path / home))
        result = vbstore.get_result("test_cnn", "knn", shapes, shapes, **KW)
        ids.append(result.id)
        runs.append(result.run)
    assert ids[0] == ids[1]
    assert runs[0].recorded < runs[1].recorded  # two runs, logged apart from the content
    store = vbstore.Store(tmp_path / "b")
    assert "timings" not in store.read_json(ids[1])
    again = vbstore.get_result("test_cnn", "knn", shapes, shapes, store=store, recompute=True,
                               **KW)
    assert again.id == ids[1]
    assert again.reproduced["reproduced"]
    assert [info.id for info in store.ls("result")] == [ids[1]]
    assert len(store.runs.of(ids[1])) == 2
    assert again.run == store.runs.of(ids[1])[0]
    assert again.as_dict()["run"]["seconds"] > 0
