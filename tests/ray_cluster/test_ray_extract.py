"""Extraction on a real two-node Ray cluster is byte-identical to a local run."""

from __future__ import annotations

import os
import shutil
import threading
import time

import pytest

from vbstore import Store
from vbstore.engine import get_features, get_result, resolve_backbone
from vbstore.engine._features import derive_featureset
from vbstore.features import ExtractorParams, RayExecutor
from vbstore.store import fsck

pytestmark = pytest.mark.slow
BB = {"weights": "random", "seed": 0}


def _features(store, data, batch_size, executor=None, **options):
    return get_features("test_vit", data, store=store, split="train", batch_size=batch_size,
                        progress=False, executor=executor, **BB, **options)


def test_ray_features_are_byte_identical_to_local(tmp_path, ray_cluster, shapes_data, small_packs,
                                                   monkeypatch):
    from vbstore.features import _packs

    executor = RayExecutor(address=ray_cluster["address"])
    with Store(tmp_path / "local") as here, Store(tmp_path / "ray") as there:
        local = _features(here, shapes_data, small_packs)
        remote = _features(there, shapes_data, small_packs, executor)
        assert remote.id == local.id
        packs = there.read_json(remote.id)["packs"]
        assert len(packs) == 5
        assert packs == here.read_json(local.id)["packs"]
        assert all(there.read_bytes(p) == here.read_bytes(p) for p in packs)
        assert remote.stats["extracted"] == 40
        assert not remote.from_cache
        # dense maps too, with packs cut by bytes rather than rows
        monkeypatch.setattr(_packs, "PACK_BYTES", 20_000)
        local = _features(here, shapes_data, small_packs, mode="both")
        remote = _features(there, shapes_data, small_packs, executor, mode="both")
        assert remote.id == local.id
        assert len(there.read_json(remote.id)["packs"]) > 1
        assert fsck(there).clean


def test_results_after_ray_extraction_are_cache_hits_locally(tmp_path, ray_cluster, shapes_data):
    executor = RayExecutor(address=ray_cluster["address"])
    args = ("test_vit", "knn", shapes_data, shapes_data)
    kwargs = {"split": "val", "train_split": "train", "weights": "random", "progress": False}
    with Store(tmp_path / "a") as a, Store(tmp_path / "b") as b:
        on_ray = get_result(*args, store=a, executor=executor, **kwargs)
        assert not on_ray.from_cache
        assert get_result(*args, store=a, **kwargs).from_cache  # local get: a hit
        here = get_result(*args, store=b, **kwargs)  # and the other way round
        assert get_result(*args, store=b, executor=executor, **kwargs).from_cache
        assert here.metrics == on_ray.metrics
        assert here.record.inputs["eval_features"] == on_ray.record.inputs["eval_features"]


def _reader_of(fifo: str, processes) -> int | None:
    """The PID (among the cluster's processes) that has ``fifo`` open."""
    import psutil

    for root in processes:
        for proc in [psutil.Process(root.pid), *psutil.Process(root.pid).children(recursive=True)]:
            try:
                if any(os.readlink(f"/proc/{proc.pid}/fd/{fd}") == fifo
                       for fd in os.listdir(f"/proc/{proc.pid}/fd")):
                    return proc.pid
            except (psutil.Error, OSError):
                continue
    return None


def test_an_actor_killed_mid_extraction_changes_nothing(tmp_path, ray_cluster, shapes_data,
                                                        small_packs):
    """One image is swapped for a FIFO, so the actor that reads it blocks mid-pack; it is
    killed by PID there, the image put back, and Ray's retry must still give the same packs."""
    import signal

    from vbstore.data import load_manifest

    data = tmp_path / "data"
    shutil.copytree(shapes_data, data)
    with Store(tmp_path / "local") as here, Store(tmp_path / "ray") as there:
        local = _features(here, str(data), small_packs)
        manifest = load_manifest(there, str(data), split="train")
        target = str(manifest.image_path(len(manifest.doc["samples"]) - 3))  # in the last pack
        real = target + ".real"
        os.replace(target, real)
        os.mkfifo(target)
        killed: dict[str, object] = {}

        def kill_the_reader() -> None:
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                try:  # succeeds once an actor is opening the FIFO to read it
                    writer = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
                except OSError:
                    time.sleep(0.05)
                    continue
                pid = None
                while pid is None and time.monotonic() < deadline:
                    pid = _reader_of(target, ray_cluster["processes"])
                    time.sleep(0.05)
                killed["packs_before"] = sum(1 for _ in there.files.iter_files())
                os.replace(real, target)  # the retried range reads the real image
                os.kill(pid, signal.SIGKILL)
                killed["pid"] = pid
                os.close(writer)
                return

        thread = threading.Thread(target=kill_the_reader, daemon=True)
        thread.start()
        ref = resolve_backbone(there, "test_vit", **BB)
        params = ExtractorParams(pooling=ref.default_pooling)
        try:  # the manifest read before the swap: reading it again would hash the FIFO
            remote_id = derive_featureset(
                there, ref, manifest, params, progress=False, batch_size=small_packs,
                executor=RayExecutor(address=ray_cluster["address"])).id
        finally:
            thread.join(5)
            if os.path.exists(real):
                os.replace(real, target)
        assert "pid" in killed, "no actor ever read the swapped image"
        assert remote_id == local.id
        report = fsck(there)
        assert report.clean, report.as_dict()


def test_workers_write_to_an_s3_sink_the_driver_adopts(tmp_path, ray_cluster, shapes_data,
                                                       small_packs, moto_endpoint, monkeypatch):
    import boto3

    from vbstore.remotes import add_remote

    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing-secret",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    boto3.client("s3", endpoint_url=moto_endpoint).create_bucket(Bucket="sink")
    with Store(tmp_path / "local") as here, Store(tmp_path / "ray") as there:
        local = _features(here, shapes_data, small_packs)
        add_remote(there, "sink", "s3://sink/run", {"endpoint_url": moto_endpoint})
        remote = _features(there, shapes_data, small_packs,
                           RayExecutor(address=ray_cluster["address"], sink="sink"))
        assert remote.id == local.id
        packs = there.read_json(remote.id)["packs"]
        listing = boto3.client("s3", endpoint_url=moto_endpoint).list_objects_v2(
            Bucket="sink", Prefix="run/objects/")
        uploaded = {item["Key"].split("/", 2)[2].replace("/", "") for item in listing["Contents"]}
        assert set(packs) <= uploaded  # every pack went through the sink
        assert all(there.verify(p) for p in packs)
        assert fsck(there).clean
