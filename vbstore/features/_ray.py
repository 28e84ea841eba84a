"""Extraction on a Ray cluster, byte-identical to a local run.

A local run forwards the missing images in batches of ``batch_size`` and its
:class:`PackWriter` flushes a pack after the first batch that fills it, so every full pack holds
:func:`rows_per_pack` rows. The driver cuts the work at exactly those boundaries (one probe
forward of one image gives the bytes per row); Ray Data feeds each range to an actor pool (one
actor per GPU, or CPU actors) that decodes on threads, forwards the same batches and writes the
same pack with the same writer, into a sink: this store's ``objects/`` folder when the workers
share its filesystem, or a configured remote. Only the driver opens ``registry.db``: it adopts
each pack verified (re-hashed, and its row list checked), registers its rows, and finally the
featureset. A retried or duplicated range writes the same bytes under the same id, so Ray's
actor restarts and task retries are harmless; a pack adopted before a Ctrl-C keeps its rows, so
the next run extracts only what is left.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import canonical
from ..errors import ExecutorError
from ..store import ObjectFiles, to_safetensors_bytes
from . import _packs
from ._extract import DTYPES, Plan, _prefetch, decode_image, progress_bar
from ._packs import PackWriter, row_bytes, rows_per_pack
from ._params import ExtractorParams, extractor_key
from ._progress import ExtractProgress

# Local imports: ray loads when something is extracted on Ray; the backbone (torch), the remotes
# and safetensors load inside a Ray worker or the sink that needs them.

log = logging.getLogger(__name__)


def _build(source: Any, backbone_id: str, params: ExtractorParams):
    """The backbone on a worker, checked to be the driver's (same weights, same record)."""
    if isinstance(source, dict):
        from ..backbones import build_backbone

        backbone = build_backbone(**source)
        weights = canonical.digest(canonical.dumps({**backbone.weights_record(),
                                                    "kind": "weights"}))
        found = canonical.digest(canonical.dumps({**backbone.record(), "weights": weights,
                                                  "kind": "backbone"}))
        if found != backbone_id:
            raise ExecutorError(f"a Ray worker builds backbone {found[:12]}, not the driver's "
                                f"{backbone_id[:12]}",
                                hint="install the same vbstore, torch and weights on every node")
    else:
        backbone = source
    if params.precision == "bf16":
        backbone = backbone.in_bfloat16()
    if torch.cuda.is_available():  # Ray gives a GPU actor exactly its own device
        backbone.to("cuda")
    return backbone


def _probe_row_bytes(source: Any, backbone_id: str, params: ExtractorParams, path: str,
                     image: str) -> int:
    """Bytes one image adds to a pack: one forward of one image (a Ray task)."""
    backbone = _build(source, backbone_id, params)
    batch = decode_image(Path(path), image, backbone.preprocess).unsqueeze(0)
    out = backbone.extract(batch, layers=list(params.layers), pooling=params.pooling)
    return row_bytes(out, params.layers, params.mode, DTYPES[params.dense_dtype])


class _NoRows:
    """A worker's ``feature_rows``: rows are the driver's to register."""

    def add(self, extractor: str, pack: str, images) -> None:
        pass


class _Sink:
    """Where a worker's :class:`PackWriter` puts packs: store files or a remote, no registry."""

    def __init__(self, target: tuple[str, Any]) -> None:
        self.kind, self.where = target
        self.packs: list[str] = []
        self.feature_rows = _NoRows()

    def put_tensors(self, tensors, kind: str, metadata) -> str:
        data = to_safetensors_bytes(tensors, kind, metadata)
        oid = canonical.digest(data)
        if self.kind == "dir":
            files = ObjectFiles(Path(self.where))
            if not files.exists(oid):  # the same range done twice: the same bytes, kept once
                temp, _, _ = files.write_temp([data], known_id=oid)
                files.publish(temp, oid)
        else:
            from ..remotes import object_path, remote_for

            with remote_for(self.where) as remote:
                path = object_path(oid)
                if not remote.existing([path]):
                    remote.publish({path: data}, None, f"vbstore ray pack {oid[:12]}")
        self.packs.append(oid)
        return oid


class _PackActor:
    """A Ray Data actor: each input row is one pack's range of images; it returns the pack id."""

    def __init__(self, source, backbone_id: str, params: ExtractorParams, batch_size: int,
                 max_bytes: int, max_rows: int, sink: tuple[str, Any], decode_threads: int,
                 cpus: int) -> None:
        if not torch.cuda.is_available():
            torch.set_num_threads(cpus)
        self.backbone = _build(source, backbone_id, params)
        self.params, self.key = params, extractor_key(backbone_id, params)
        self.batch_size, self.max_bytes, self.max_rows = batch_size, max_bytes, max_rows
        self.sink, self.decode_threads = sink, decode_threads

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        jobs, packs, passes = [], [], []
        for job, paths, images in zip(batch["job"], batch["paths"], batch["images"], strict=True):
            pack, forwards = self._pack([str(p) for p in paths], [str(i) for i in images])
            jobs.append(int(job))
            packs.append(pack)
            passes.append(forwards)
        return {"job": np.array(jobs), "pack": np.array(packs), "forward_passes": np.array(passes)}

    def _pack(self, paths: list[str], images: list[str]) -> tuple[str, int]:
        params, backbone = self.params, self.backbone
        sink = _Sink(self.sink)
        writer = PackWriter(sink, self.key, params.layers, params.mode, DTYPES[params.dense_dtype],
                            max_bytes=self.max_bytes, max_rows=self.max_rows)

        def load(i: int) -> torch.Tensor:
            return decode_image(Path(paths[i]), images[i], backbone.preprocess)

        forwards = 0
        batches = _prefetch(load, range(len(paths)), self.batch_size, self.decode_threads)
        for chunk, batch in batches:
            if backbone.device.type == "cuda":
                batch = batch.pin_memory()
            out = backbone.extract(batch, layers=list(params.layers), pooling=params.pooling)
            writer.add([images[i] for i in chunk], out)
            forwards += 1
        writer.flush()
        if len(sink.packs) != 1:  # the driver's boundaries and this writer's must agree
            raise ExecutorError(f"a Ray worker wrote {len(sink.packs)} packs for one pack's rows")
        return sink.packs[0], forwards


def _sink_target(store, sink: str | None) -> tuple[str, Any]:
    if sink is None:
        return "dir", str(store.root)
    from ..remotes import registry

    return "remote", registry(store).get(sink)  # UnknownRemote names `vbstore remote add`


def _adopt(store, target: tuple[str, Any], pack: str) -> None:
    """Bring a worker's pack into the registry, verified."""
    if target[0] == "dir":
        store.adopt(pack, "pack")
        return
    from ..remotes import Entry, PullResult, install, remote_for

    with remote_for(target[1]) as remote:  # re-hashed and checked as a pack before it enters
        install(store, remote, [Entry(pack, "pack", -1, (), None)], None, PullResult(remote.name),
                required=[pack])


def _pack_images(store, pack: str) -> list[str]:
    from safetensors import safe_open

    with safe_open(str(store.path(pack)), framework="pt") as handle:
        return json.loads((handle.metadata() or {}).get("images", "[]"))


def _rows(dataset) -> Generator[dict[str, Any], None, None]:
    """The dataset's rows; closing this generator closes Ray Data's own."""
    yield from dataset.iter_rows()


def _default_workers(ray) -> tuple[int, bool]:
    gpus = int(ray.cluster_resources().get("GPU", 0))
    if gpus:
        return gpus, True
    return max(1, sum(1 for node in ray.nodes() if node.get("Alive"))), False


def extract_on_ray(executor, store, manifest, plan: Plan, backbone_id: str,
                   params: ExtractorParams, *, recipe: dict[str, Any] | None, load_backbone,
                   batch_size: int, progress: bool | Callable[..., Any], stats
                   ) -> dict[str, tuple[str, int]]:
    """Run ``plan.todo`` through the backbone on Ray; return ``image → (pack, row)`` of new rows.

    ``progress`` is a callable given an :class:`ExtractProgress` after each adopted pack (what
    the CLI prints), True for a bar, or False. On Ctrl-C (or any error) the pipeline is shut
    down, and the connection too when this call made it, so no actor of this run writes after
    it returns; the packs adopted so far keep their rows and the next run extracts the rest.

    Raises:
        ExecutorError: the cluster cannot be reached, or a pack came back wrong or not at all.
        UnknownRemote: ``executor.sink`` names no configured remote.
    """
    import ray  # heavy: only when something is extracted on Ray

    started = time.perf_counter()
    target = _sink_target(store, executor.sink)
    owned = executor.connect()
    source = recipe or ray.put(load_backbone())  # a custom backbone object travels pickled
    key = extractor_key(backbone_id, params)
    paths = [str(manifest.image_path(i)) for i in plan.todo]
    images = [plan.images[i] for i in plan.todo]
    probe = ray.remote(num_cpus=1, max_retries=3)(_probe_row_bytes)
    per_row = ray.get(probe.remote(source, backbone_id, params, paths[0], images[0]))
    max_bytes, max_rows = _packs.PACK_BYTES, _packs.PACK_ROWS  # read now: tests shrink them
    per_pack = rows_per_pack(per_row, batch_size, max_bytes, max_rows)
    jobs = [{"job": n, "paths": paths[s : s + per_pack], "images": images[s : s + per_pack]}
            for n, s in enumerate(range(0, len(images), per_pack))]
    workers, gpu = _default_workers(ray)
    workers = min(executor.workers or workers, len(jobs))
    resources = {"num_gpus": 1} if gpu else {"num_cpus": executor.cpus_per_worker}
    stats.build_seconds = time.perf_counter() - started  # connect, probe and plan

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # ours counts images over all workers
    logging.getLogger("ray.data").setLevel(logging.WARNING)  # no per-run INFO lines on stderr
    dataset = ray.data.from_items(jobs, override_num_blocks=len(jobs)).map_batches(
        _PackActor, batch_size=1, compute=ray.data.ActorPoolStrategy(size=workers),
        zero_copy_batch=True,
        fn_constructor_kwargs={"source": source, "backbone_id": backbone_id, "params": params,
                               "batch_size": batch_size, "max_bytes": max_bytes,
                               "max_rows": max_rows, "sink": target,
                               "decode_threads": executor.decode_threads,
                               "cpus": executor.cpus_per_worker},
        **resources)  # Ray Data restarts a dead actor and retries its range (max_restarts=-1)
    rows: dict[str, tuple[str, int]] = {}
    done: set[int] = set()
    report = progress if callable(progress) else None
    begun = time.perf_counter()
    try:  # closing the stream stops Ray Data's executor and its actor pool
        with progress_bar(len(images), progress is True) as bar, \
                contextlib.closing(_rows(dataset)) as stream:
            for out in stream:
                number = int(out["job"])  # the job's index in jobs, as its "job" field says
                job = jobs[number]
                if number in done:  # a retried range answered twice: same pack, nothing to add
                    continue
                pack = str(out["pack"])
                _adopt(store, target, pack)
                if _pack_images(store, pack) != job["images"]:
                    raise ExecutorError(f"pack {pack[:12]} from a Ray worker holds other images "
                                        "than its range",
                                        hint="run `vbstore fsck`, then the command again")
                store.feature_rows.add(key, pack, job["images"])
                rows.update({image: (pack, row) for row, image in enumerate(job["images"])})
                stats.forward_passes += int(out["forward_passes"])
                done.add(number)
                if bar is not None:
                    bar.update(len(job["images"]))
                if report is not None:
                    report(ExtractProgress(len(rows), len(images), time.perf_counter() - begun,
                                           workers))
    except BaseException:
        if owned:  # the job ends with the connection: Ray kills whatever it still runs
            ray.shutdown()
        raise
    if len(done) != len(jobs):
        raise ExecutorError(f"Ray returned {len(done)} of {len(jobs)} packs",
                            hint="run the command again: the packs already stored are kept")
    return rows
