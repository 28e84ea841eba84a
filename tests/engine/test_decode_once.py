"""Each image decoded once per request (issue #36): the manifest's check keeps the RGB image it
decoded (``vbstore/data/_decoded.py``), extraction's ``decode_image`` takes it; the features,
their ids and the metrics are those of the old path, bit for bit."""

import multiprocessing
import shutil

import numpy as np
import pytest
import torch

import vbstore
from vbstore.data import _decoded as decoded
from vbstore.data import decode_once, load_manifest
from vbstore.errors import BadInput, UsageError
from vbstore.features import _extract

KW = dict(weights="random", input_size=32, progress=False)


@pytest.fixture(scope="module")
def modes(tmp_path_factory):
    """``modes/{a,b}/...``: one image per mode and format a dataset may hold (PNG in RGB, L,
    LA, P with transparency, RGBA, I;16 and 1-bit; GIF, BMP, TIFF, WebP; a JPEG, checked at
    1/8 scale and so never kept), 20 x 24 px (resized by the preprocessing)."""
    from PIL import Image

    root = tmp_path_factory.mktemp("modes") / "modes"
    rng = np.random.default_rng(0)
    rgb = Image.fromarray(rng.integers(0, 256, (24, 20, 3), dtype=np.uint8))
    gray = Image.fromarray(rng.integers(0, 256, (24, 20), dtype=np.uint8))
    palette = rgb.quantize(16)
    palette.info["transparency"] = 3
    files = {
        "a/rgb.png": rgb, "a/gray.png": gray, "a/la.png": rgb.convert("LA"),
        "a/palette.png": palette, "a/rgba.png": rgb.convert("RGBA"),
        "a/deep.png": Image.fromarray(rng.integers(0, 65536, (24, 20), dtype=np.uint16)),
        "b/bits.png": gray.convert("1"), "b/anim.gif": palette, "b/plain.bmp": rgb,
        "b/scan.tif": rgb, "b/web.webp": rgb, "b/photo.jpg": rgb,
    }
    for name, image in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        image.save(root / name, **({"lossless": True} if name.endswith(".webp") else {}))
    return str(root)


@pytest.fixture
def fallbacks(monkeypatch):
    """The images decode_image read, hashed and decoded itself (the old path), by hash."""
    seen = []
    real = _extract.digest
    monkeypatch.setattr(_extract, "digest", lambda data: seen.append(real(data)) or seen[-1])
    return seen


def features(tmp_path, name, data, **kw):
    """``get_features`` of ``data``'s images in a store of its own (every file hashed afresh)."""
    with vbstore.Store(tmp_path / name) as store:
        got = vbstore.get_features("test_cnn", data, store=store, **KW, **kw)
        return got.id, got.features.pooled(), got.manifest


def test_every_mode_preprocesses_to_the_same_tensor_from_the_kept_image(store, modes):
    """What the check keeps is what decode_image made of the file's bytes: the same tensor, for
    every mode and format; the JPEG (checked at 1/8 scale) is not kept."""
    from PIL import Image

    from vbstore.backbones import build_backbone

    preprocess = build_backbone("test_cnn", weights="random", input_size=32).preprocess
    with decode_once():
        view = load_manifest(store, modes)
        assert decoded.kept_count() == len(view) - 1
        paths = [view.image_path(i) for i in range(len(view))]
        hashes = [s["image"] for s in view.samples]
        kept = [decoded.take_decoded(h) for h in hashes]
    assert [p.name for p, k in zip(paths, kept, strict=True) if k is None] == ["photo.jpg"]
    for path, expected, image in zip(paths, hashes, kept, strict=True):
        made = _extract.decode_image(path, expected, preprocess)  # no scope: the old path
        if image is not None:
            assert torch.equal(preprocess(image), made), path.name
            # what any preprocessing is given: the file's image as decode_image converts it
            with Image.open(path) as opened:
                rgb = opened.convert("RGB")
            assert (image.mode, image.size, image.tobytes()) == \
                   (rgb.mode, rgb.size, rgb.tobytes()), path.name


def test_features_and_their_ids_are_the_same_with_and_without_kept_images(
        tmp_path, modes, fallbacks, monkeypatch):
    monkeypatch.setenv(decoded.BUDGET_ENV, "0")  # nothing kept: every image decoded twice
    without = features(tmp_path, "without", modes)
    assert len(fallbacks) == 12
    fallbacks.clear()
    monkeypatch.delenv(decoded.BUDGET_ENV)
    kept = features(tmp_path, "kept", modes)
    assert fallbacks == [kept[2].samples[kept[2].names.index("b/photo.jpg")]["image"]]
    assert kept[0] == without[0]
    assert torch.equal(kept[1], without[1])
    assert decoded.kept_count() == 0


def test_a_result_is_the_same_with_and_without_kept_images(tmp_path, shapes, fallbacks,
                                                           monkeypatch):
    answers = []
    for budget in ("0", "256"):
        monkeypatch.setenv(decoded.BUDGET_ENV, budget)
        fallbacks.clear()
        with vbstore.Store(tmp_path / budget) as store:
            got = vbstore.get_result("test_cnn", "knn", shapes, shapes, split="val",
                                     train_split="train", store=store, **KW)
        answers.append((got.id, got.metrics, got.record.inputs, len(fallbacks)))
    (plain_id, plain_metrics, plain_inputs, plain_reads), (kept_id, kept_metrics, kept_inputs,
                                                            kept_reads) = answers
    assert (plain_reads, kept_reads) == (60, 0)
    assert kept_id == plain_id
    assert kept_metrics == plain_metrics
    assert kept_inputs == plain_inputs  # the featuresets: ids of the packs' bytes


def test_images_past_the_budget_are_decoded_as_before(tmp_path, shapes, fallbacks,
                                                      monkeypatch):
    """Filled until full, never evicted: five images fit, the 25 others take the old path."""
    seen = []
    real = _extract.plan_extraction
    monkeypatch.setattr(_extract, "plan_extraction",
                        lambda *a: seen.append(decoded.kept_count()) or real(*a))
    monkeypatch.setattr(decoded, "budget", lambda: 5 * 32 * 32 * decoded.RGB_BYTES)
    kept = features(tmp_path, "kept", shapes, split="val")
    assert seen == [5]
    assert len(fallbacks) == 25
    assert decoded.kept_count() == 0
    monkeypatch.setenv(decoded.BUDGET_ENV, "0")
    plain = features(tmp_path, "plain", shapes, split="val")
    assert kept[0] == plain[0]
    assert torch.equal(kept[1], plain[1])


@pytest.mark.parametrize("why", ["stored rows", "worker processes"])
def test_kept_images_no_thread_will_take_are_dropped_at_extraction(tmp_path, shapes, why):
    """Within a longer request (a suite, a caller's scope), images the extraction will not take
    (its rows already stored; decoded in DataLoader workers) are dropped when it starts, not
    held to the request's end."""
    copy = tmp_path / "copy"
    shutil.copytree(shapes, copy)  # the same bytes under other paths: hashed afresh, kept
    # one image fewer: another manifest, so its featureset is assembled, not found whole
    next((copy / "val").rglob("*.png")).unlink()
    with vbstore.Store(tmp_path / "store") as store:
        if why == "stored rows":
            vbstore.get_features("test_cnn", shapes, split="val", store=store, **KW)
        options = {"loader": "workers", "workers": 1} if why == "worker processes" else {}
        with decode_once():
            load_manifest(store, str(copy), split="val")
            assert decoded.kept_count() == 29
            got = vbstore.get_features("test_cnn", str(copy), split="val", store=store, **KW,
                                       **options)
            assert decoded.kept_count() == 0
        assert got.stats["reused" if why == "stored rows" else "extracted"] == 29


def test_the_scope_drops_what_it_kept_when_it_closes(tmp_path):
    from PIL import Image

    image = Image.new("RGB", (4, 4))
    assert not decoded.keep_decoded("a", image)  # no scope: nothing is kept
    with decode_once():
        assert decoded.keep_decoded("a", image)
        with decode_once():  # nested (a sweep's unit inside a request): the outer one owns it
            assert decoded.keep_decoded("b", image)
        assert decoded.kept_count() == 2
        assert decoded.take_decoded("b") is image
        assert decoded.take_decoded("b") is None  # each is read once, then dropped
        assert decoded.kept_count() == 1
    assert decoded.kept_count() == 0
    def fails():
        with decode_once():
            decoded.keep_decoded("a", image)
            raise KeyError("a")

    with pytest.raises(KeyError):
        fails()
    assert decoded.kept_count() == 0
    assert decoded.take_decoded("a") is None


def test_a_request_keeps_nothing_once_it_returns_or_fails(tmp_path, shapes, monkeypatch):
    """A copy of extracted data: its files are new to the store (hashed and decoded afresh,
    kept) but its features are reused, so nothing takes them; they go when the request ends,
    and when it fails."""
    copy = tmp_path / "copy"
    shutil.copytree(f"{shapes}/val", copy)
    with vbstore.Store(tmp_path / "store") as store:
        vbstore.get_features("test_cnn", shapes, split="val", store=store, **KW)
        seen = []
        real = _extract.plan_extraction
        monkeypatch.setattr(_extract, "plan_extraction",
                            lambda *a: seen.append(decoded.kept_count()) or real(*a))
        again = vbstore.get_features("test_cnn", str(copy), store=store, **KW)
        assert again.stats["reused"] == 30
        assert seen == [30]
        assert decoded.kept_count() == 0

        def fails(*args):
            seen.append(decoded.kept_count())
            raise BadInput("planned to fail", [])

        monkeypatch.setattr(_extract, "plan_extraction", fails)
        shutil.copytree(f"{shapes}/val", tmp_path / "third")
        (tmp_path / "third" / "circle").rename(tmp_path / "third" / "disc")  # another manifest
        with pytest.raises(BadInput, match="planned to fail"):
            vbstore.get_features("test_cnn", str(tmp_path / "third"), store=store, **KW)
    assert seen[-1] == 30
    assert decoded.kept_count() == 0


def test_an_image_changed_after_the_manifest_is_refused_unless_it_was_kept(tmp_path, shapes,
                                                                           monkeypatch):
    """A kept image is the pixels of the manifest's bytes, whatever the file holds now; one not
    kept is read again, and refused when its bytes changed."""
    from vbstore.backbones import build_backbone

    preprocess = build_backbone("test_cnn", weights="random", input_size=32).preprocess
    copy = tmp_path / "copy"
    shutil.copytree(f"{shapes}/val", copy)
    monkeypatch.setattr(decoded, "budget", lambda: 32 * 32 * decoded.RGB_BYTES)  # one image
    with vbstore.Store(tmp_path / "store") as store, decode_once():
        view = load_manifest(store, copy)
        hashes = [s["image"] for s in view.samples]
        (kept,) = [i for i, h in enumerate(hashes) if h in decoded._images]
        originals = [view.image_path(i).read_bytes() for i in range(len(view))]
        for i in range(len(view)):  # every file rewritten: other bytes, other hash
            view.image_path(i).write_bytes(originals[(i + 1) % len(view)])
        made = _extract.decode_image(view.image_path(kept), hashes[kept], preprocess)
        for i in range(len(view)):
            if i != kept:
                with pytest.raises(BadInput, match="changed since the manifest was read"):
                    _extract.decode_image(view.image_path(i), hashes[i], preprocess)
    view.image_path(kept).write_bytes(originals[kept])
    assert torch.equal(made, _extract.decode_image(view.image_path(kept), hashes[kept],
                                                   preprocess))


def _count_in_child(queue):
    queue.put(decoded.kept_count())


def test_a_forked_worker_starts_with_nothing_kept(tmp_path, shapes):
    """A DataLoader worker is a fork: it decodes as before, with the parent's scope closed."""
    from PIL import Image

    with decode_once():
        decoded.keep_decoded("a", Image.new("RGB", (4, 4)))
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        child = context.Process(target=_count_in_child, args=(queue,))
        child.start()
        child.join(60)
        assert queue.get(timeout=5) == 0
        assert decoded.kept_count() == 1
    plain = features(tmp_path, "threads", shapes, split="val")
    workers = features(tmp_path, "workers", shapes, split="val", loader="workers", workers=1)
    assert workers[0] == plain[0]


@pytest.mark.parametrize("value", ["lots", "-1", "1.5"])
def test_a_budget_that_is_no_number_of_mib_is_refused(monkeypatch, value):
    monkeypatch.setenv(decoded.BUDGET_ENV, value)
    with pytest.raises(UsageError, match=f"{decoded.BUDGET_ENV}=.* is not a number of MiB"), \
            decode_once():
        pass
