"""Streamed extraction: decode on threads, one forward per batch for all layers, packs as it goes.

Decoding runs on a small thread pool a few batches ahead of the forward pass (PIL and torch both
release the GIL), so the model rarely waits for JPEGs. Only a bounded window of batches is ever
in memory, and packs are flushed at a fixed size, so peak memory does not grow with the dataset.
Images whose features this extractor already produced, for any dataset, are reused, not
recomputed.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections import deque
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from typing import Any

import torch
from PIL import Image
from torch.utils.data import DataLoader

from .. import _threads
from .._budget import check_input_size
from .._progress import about, reporting
from .._progress import progress as step_progress
from ..canonical import digest
from ..data import discard_decoded, is_kept, take_decoded
from ..errors import BadInput
from ..store import pack_index
from ._packs import PackWriter
from ._params import ExtractorParams, extractor_doc, extractor_key
from ._progress import ExtractProgress

# the decode threads of a local extraction (their names)
DECODE_THREADS = "vbstore-decode"
DTYPES = {"float16": torch.float16, "float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass
class ExtractionStats:
    """What one extraction did: images run through the backbone and images reused."""

    extracted: int = 0
    reused: int = 0
    forward_passes: int = 0
    build_seconds: float = 0.0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _prefetch(load: Callable[[int], torch.Tensor], indices: Sequence[int], batch_size: int,
              workers: int, ahead: int = 3, alike: bool = True,
              ) -> Generator[tuple[list[int], torch.Tensor], None, None]:
    """Batches of ``load(i)`` stacked, decoded ``ahead`` batches in advance on ``workers``
    threads. Each batch goes to the threads as one run of images per thread, not an image per
    task: a future and its locks per image cost about what decoding a small image does.

    The first batch is loaded here, each image timed: where images are fast to load and
    preprocess (:func:`vbstore._threads.fast`), one thread loads the rest, since more would
    fight for the GIL over them (docs/scale.md). ``alike``: whether the first batch costs what
    the rest do (False: some images, not all, were kept decoded; the rest stay on ``workers``
    threads). The batches are the same either way."""
    threads = max(1, workers)
    first, seconds = list(indices[:batch_size]), []

    def timed(i: int) -> torch.Tensor:
        start = time.perf_counter()
        tensor = load(i)
        seconds.append(time.perf_counter() - start)
        return tensor

    loaded = [timed(i) for i in first]
    if alike and _threads.fast(seconds, _threads.DECODE_FAST_SECONDS):
        threads = 1

    def run(chunk: list[int]) -> list[torch.Tensor]:
        return [load(i) for i in chunk]

    def submit(chunk: list[int]) -> list:
        step = -(-len(chunk) // threads)
        return [pool.submit(run, chunk[at:at + step]) for at in range(0, len(chunk), step)]

    def stacked(futures: list) -> torch.Tensor:
        return torch.stack([tensor for future in futures for tensor in future.result()])

    with ThreadPoolExecutor(threads, thread_name_prefix=DECODE_THREADS) as pool:
        starts = iter(range(len(first), len(indices), batch_size))
        window: deque = deque()
        for start in islice(starts, ahead):  # on their way while the first batch is used
            chunk = list(indices[start : start + batch_size])
            window.append((chunk, submit(chunk)))
        if first:
            batch = torch.stack(loaded)
            loaded.clear()  # not held twice while the batch is used
            yield first, batch
        for start in starts:
            chunk = list(indices[start : start + batch_size])
            window.append((chunk, submit(chunk)))
            chunk, futures = window.popleft()
            yield chunk, stacked(futures)
        while window:
            chunk, futures = window.popleft()
            yield chunk, stacked(futures)


def decode_image(path, expected: str, preprocess) -> torch.Tensor:
    """Read, check against the manifest's hash, decode and preprocess one image; or preprocess
    the image the manifest's check decoded in this request from bytes of that very hash
    (:func:`vbstore.data.decode_once`: nothing read, hashed or decoded again).

    Raises:
        BadInput: the file changed since the manifest was read, or cannot be decoded.
    """
    try:
        image = take_decoded(expected)
        if image is not None:  # the RGB pixels of bytes whose BLAKE3 is the manifest's
            return preprocess(image)
        data = path.read_bytes()
        # features are shared by image hash: never file them under bytes they were not made of
        if digest(data) != expected:
            raise BadInput("images changed since the manifest was read",
                           [(str(path), "its bytes no longer match the manifest")],
                           hint="run the command again to re-read the data")
        with Image.open(io.BytesIO(data)) as image:
            return preprocess(image.convert("RGB"))
    except BadInput:
        raise
    except (OSError, ValueError) as exc:
        raise BadInput("unreadable images", [(str(path), str(exc))]) from None


class _Decode(torch.utils.data.Dataset[tuple[int, torch.Tensor]]):
    """Picklable decode + preprocess of one sample, for DataLoader worker processes."""

    def __init__(self, manifest, preprocess, indices: Sequence[int]) -> None:
        self.manifest, self.preprocess, self.indices = manifest, preprocess, list(indices)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, position: int) -> tuple[int, torch.Tensor]:
        index = self.indices[position]
        expected = self.manifest.samples[index]["image"]
        return index, decode_image(self.manifest.image_path(index), expected, self.preprocess)


def _worker_batches(decode: _Decode, batch_size: int, workers: int
                    ) -> Generator[tuple[list[int], torch.Tensor], None, None]:
    def collate(items):
        return [i for i, _ in items], torch.stack([t for _, t in items])

    yield from DataLoader(decode, batch_size=batch_size, num_workers=workers, collate_fn=collate,
                          prefetch_factor=2 if workers else None, persistent_workers=False)


@contextlib.contextmanager
def progress_bar(total: int, enabled: bool, split: str | None = None):
    """The extraction's progress (vbstore._progress): a bar on a terminal, else plain lines,
    each naming the split it reads after the backbone the engine names."""
    with reporting(enabled), about(split), \
            step_progress("extracting features", total, "image") as bar:
        yield bar


@dataclass
class Plan:
    """What an extraction must do: the manifest's image ids, the rows the store already holds,
    and the manifest indices to run through the backbone (each missing image once, in order)."""

    images: list[str]
    rows: dict[str, tuple[str, int]]
    todo: list[int]
    reused: int


def plan_extraction(store, manifest, key: str) -> Plan:
    """The images of ``manifest`` that extractor ``key`` still has to compute.

    A stored row is reused only when its pack's header names this image at that row and this
    extractor (a header read per pack, no tensor read): a registry row that says otherwise is
    computed again, and the new pack's row replaces it.
    """
    images = [sample["image"] for sample in manifest.samples]
    have = tied_rows(store, key, store.feature_rows.find(key, images))
    first_index: dict[str, int] = {}
    for index, image in enumerate(images):
        if image not in have:
            first_index.setdefault(image, index)
    store.touch({pack for pack, _ in have.values()})  # reused: recently used, for gc and eviction
    reused = len(images) - sum(1 for image in images if image in first_index)
    return Plan(images, dict(have), list(first_index.values()), reused)


def tied_rows(store, key: str, rows: dict[str, tuple[str, int]]) -> dict[str, tuple[str, int]]:
    """The rows of ``rows`` (image → (pack, row)) whose pack's header agrees."""
    headers = {pack: pack_index(store.path(pack)) for pack in {p for p, _ in rows.values()}}
    kept = {}
    for image, (pack, row) in rows.items():
        header = headers[pack]
        if header is not None and header[0] == key and 0 <= row < len(header[1]) \
                and header[1][row] == image:
            kept[image] = (pack, row)
    return kept


def store_featureset(store, manifest, backbone_id: str, params: ExtractorParams,
                     plan: Plan, edges: dict[str, Any] | None = None) -> str:
    """Write the featureset record once every image of ``plan`` has a row (``edges``: inputs
    beside the packs, e.g. the fine-tuned weights ``backbone_id`` names)."""
    rows, images = plan.rows, plan.images
    packs = sorted({rows[image][0] for image in images})
    position = {pack: i for i, pack in enumerate(packs)}
    doc = {
        "extractor": extractor_doc(backbone_id, params),
        "extractor_key": extractor_key(backbone_id, params),
        "manifest": manifest.id,
        "backbone": backbone_id,
        "packs": packs,
        "rows": [[position[rows[image][0]], rows[image][1]] for image in images],
    }
    return store.put_json(doc, "featureset", edges={"pack": packs, **(edges or {})})


def extract_featureset(
    store, manifest, backbone_id: str, params: ExtractorParams,
    load_backbone: Callable[[], Any], *, batch_size: int = 32, workers: int = 2,
    device: str | None = None, progress: bool | Callable[..., Any] = True,
    loader: str = "threads",
    executor: Any = None, recipe: dict[str, Any] | None = None,
) -> tuple[str, ExtractionStats]:
    """Compute (or assemble from reusable rows) the featureset of ``manifest``; store it.

    Args:
        store: the :class:`vbstore.Store`.
        manifest: a loaded manifest (``.id``, ``.doc``, ``.load_image(i)``, ``.image_path(i)``).
        backbone_id: id of the ``backbone`` artifact the features belong to.
        params: extractor settings with the pooling already resolved.
        load_backbone: builds the backbone; called only if some image needs a forward pass.
        progress: True for a progress bar, False for none, or a callable given an
            :class:`ExtractProgress` after each batch (each pack on Ray).
        loader: ``threads`` (decode on a thread pool in this process) or ``workers`` (a torch
            DataLoader with worker processes); benchmarks/extract_bench.py compares them.
        executor: None to extract here, or a :class:`RayExecutor` to extract on a Ray cluster
            (same packs, same featureset id).
        recipe: the ``build_backbone`` arguments workers of an executor rebuild the backbone
            from (None: ``load_backbone()`` is built here and shipped to them).

    Returns:
        The featureset id and what was done to produce it.
    """
    started = time.perf_counter()
    stats = ExtractionStats()
    key = extractor_key(backbone_id, params)
    plan = plan_extraction(store, manifest, key)
    images, todo = plan.images, plan.todo
    stats.reused = plan.reused
    # images the manifest's check kept that no thread here will take: free them now, not when
    # the request ends (rows already stored; an extraction in other processes)
    wanted = set() if executor is not None or loader == "workers" else {images[i] for i in todo}
    discard_decoded(image for image in images if image not in wanted)
    if todo and executor is not None:
        plan.rows.update(executor.extract(
            store, manifest, plan, backbone_id, params, recipe=recipe, load_backbone=load_backbone,
            batch_size=batch_size, progress=progress, stats=stats))
        stats.extracted = len(todo)
    elif todo:
        built = time.perf_counter()
        backbone = load_backbone()
        if params.precision == "bf16":  # bf16 weights: faster on CPUs and GPUs with bf16 units
            backbone = backbone.in_bfloat16()
        stats.build_seconds = time.perf_counter() - built
        check_input_size(backbone.cfg.input_size, batch=min(batch_size, len(todo)),
                         patch_size=backbone.patch_size)
        if device:
            backbone.to(device)
        writer = PackWriter(store, key, params.layers, params.mode, DTYPES[params.dense_dtype])

        decode = _Decode(manifest, backbone.preprocess, todo)
        if loader == "workers":
            batches = _worker_batches(decode, batch_size, workers)
        else:
            position = {index: p for p, index in enumerate(todo)}
            kept = sum(is_kept(images[i]) for i in todo)
            batches = _prefetch(lambda i: decode[position[i]][1], todo, batch_size, workers,
                                alike=kept in (0, len(todo)))
        report = progress if callable(progress) else None
        begun, done = time.perf_counter(), 0
        # closed at once if the forward raises: the decode threads are joined then, not when
        # the traceback that holds the generator is freed
        with progress_bar(len(todo), progress is True, manifest.doc.get("split")) as bar, \
                contextlib.closing(batches):
            for chunk, batch in batches:
                if backbone.device.type == "cuda":
                    batch = batch.pin_memory()
                out = backbone.extract(batch, layers=list(params.layers), pooling=params.pooling)
                stats.forward_passes += 1
                writer.add([images[i] for i in chunk], out)
                done += len(chunk)
                if bar is not None:
                    bar.update(len(chunk))
                if report is not None:
                    report(ExtractProgress(done, len(todo), time.perf_counter() - begun))
        writer.flush()
        plan.rows.update(writer.rows)
        stats.extracted = len(todo)
    featureset = store_featureset(store, manifest, backbone_id, params, plan)
    stats.seconds = time.perf_counter() - started
    return featureset, stats
