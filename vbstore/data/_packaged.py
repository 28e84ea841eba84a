"""Data that installed packages ship, written once under ``<store>/datasets/`` and read from there.

``sklearn:digits``  the 1,797 8x8 digits, upscaled 4x (nearest) to 32x32 PNG, as an image folder
                    with a fixed, class-stratified train/val split (25 % val, seed 0).
``skimage:lfw_subset`` scikit-image's 200 25x25 grey crops, 100 faces (Labeled Faces in the
                    Wild) and 100 non-faces, as an image folder (``face``, ``nonface``) with a
                    fixed, class-stratified train/val split (25 % val, seed 0).
``skimage:samples`` eight of scikit-image's bundled photos with captions, as a JSONL
                    image-caption list (zero-shot retrieval demos).
``shapes[:k=v,...]`` :func:`make_shapes` with the given ``per_class``, ``noise``, ``seed``,
                    ``size`` (defaults 20, 0.0, 0, 64), ``classes`` (5; 4 draws VisBench's
                    circle, square, triangle, cross), ``grain`` and ``contrast`` (0.0: VisBench's
                    demo noise and shape contrast, grey levels).
``scenes[:k=v,...]`` :func:`make_scenes` (ray-cast rooms with a folder per dense target) with
                    the given ``per_split``, ``seed``, ``size`` (defaults 32, 0, 64).
``triplets[:k=v,...]`` 2AFC triplets of known order (a shipped photo or digit, a mild and a
                    strong distortion of it) in the NIGHTS layout, with the given ``count``,
                    ``seed``, ``size`` (defaults 64, 0, 64).

Each folder is built in a hidden temporary folder and renamed into place, so a reader never
sees half of one, and a version suffix lets a future change of the recipe use a new folder.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

from ..errors import UsageError
from ._samples import SKIMAGE_CAPTIONS
from ._source_kinds import source_kinds

# Local imports: numpy, sklearn, skimage and the generators built on numpy load when a packaged
# source is materialised, never to parse its name; so do shutil and tempfile (with bz2, lzma,
# random: ~3 ms) and the PNG writer (zlib), which a cached read of a folder does not need.

_SHAPES_DEFAULTS = {"per_class": 20, "noise": 0.0, "seed": 0, "size": 64, "classes": 5,
                    "grain": 0.0, "contrast": 0.0}
# added later: named in the folder only when set, so the folders made before keep their names
_SHAPES_ADDED = ("classes", "grain", "contrast")
_SCENES_DEFAULTS = {"per_split": 32, "seed": 0, "size": 64}
_TRIPLETS_DEFAULTS = {"count": 64, "seed": 0, "size": 64}
_SOURCE = re.compile(r"^([a-z][a-z0-9_]*):(.*)\Z")
SOURCES = ("sklearn:digits", "skimage:lfw_subset", "skimage:samples", "shapes", "scenes",
           "triplets")
_GENERATED = ("shapes", "scenes", "triplets")


def data_prefixes() -> tuple[str, ...]:
    """The prefixes of data that is not a path: packaged (``sklearn:``, ``skimage:``),
    generated (``shapes``...) and the registered data source kinds (``hf:``...)."""
    return ("sklearn", "skimage", *_GENERATED, *source_kinds())


def parse_source(data: str) -> tuple[str, str] | None:
    """``(source, rest)`` for a packaged-data spec, None for anything else (a path).

    Raises:
        UsageError: a ``name:`` prefix that is no known source and no existing path.
    """
    if data in _GENERATED:
        return data, ""
    match = _SOURCE.match(data)
    if not match or (len(match.group(1)) == 1 and os.name == "nt"):  # C:\ is a drive, not a source
        return None
    source, rest = match.groups()
    # datasets where they already live (hf:NAME, torchvision:NAME, wds:PATH, cb:NAME): the
    # registered data source kinds (._source_kinds)
    if source not in data_prefixes():
        if Path(data).exists():
            return None
        raise UsageError(
            f"unknown data source {source + ':'!r}",
            hint=f"give a folder, a .csv/.jsonl list, {', '.join(SOURCES)}, "
            "hf:NAME, torchvision:NAME or wds:PATH",
        )
    return source, rest


def materialise(store, source: str, rest: str) -> Path:
    """The local folder (or list file) of a packaged dataset, written on first use.

    Raises:
        UsageError: an unknown dataset name or bad ``shapes`` parameters.
    """
    datasets = store.root / "datasets"
    if source == "sklearn" and rest == "digits":
        return once(datasets / "sklearn-digits-v1", _write_digits)
    if source == "skimage" and rest == "lfw_subset":
        return once(datasets / "skimage-lfw-subset-v1", _write_lfw)
    if source == "skimage" and rest == "samples":
        return once(datasets / "skimage-samples-v1", _write_skimage) / "samples.jsonl"
    if source == "shapes":
        params = _generated_params("shapes", rest, _SHAPES_DEFAULTS)
        name = "shapes-v1-" + "-".join(f"{k}{params[k]}" for k in sorted(params)
                                       if k not in _SHAPES_ADDED
                                       or params[k] != _SHAPES_DEFAULTS[k])
        from ._shapes import CLASS_ORDER, make_shapes  # numpy, only when shapes are asked for

        classes = params.pop("classes")
        if not 2 <= classes <= len(CLASS_ORDER):
            raise UsageError(f"shapes classes={classes}: draw 2 to {len(CLASS_ORDER)} shapes")
        shapes = CLASS_ORDER[:classes]
        return once(datasets / name, lambda tmp: make_shapes(tmp, shapes=shapes, **params))
    if source == "scenes":
        params = _generated_params("scenes", rest, _SCENES_DEFAULTS)
        # v2: second views, flow and pairs.csv, instances and boxes beside the v1 files (whose
        # bytes are unchanged)
        name = "scenes-v2-" + "-".join(f"{k}{params[k]}" for k in sorted(params))
        from ._scenes import make_scenes, state_target_options  # numpy: only for scenes

        root = once(datasets / name, lambda tmp: make_scenes(tmp, **params))
        state_target_options(root)  # a folder made before scenes stated its depth unit
        return root
    if source == "triplets":
        params = _generated_params("triplets", rest, _TRIPLETS_DEFAULTS)
        name = "triplets-v1-" + "-".join(f"{k}{params[k]}" for k in sorted(params))
        from ._make_triplets import make_triplets  # numpy, only when triplets are asked for

        return once(datasets / name, lambda tmp: make_triplets(tmp, **params))
    raise UsageError(
        f"unknown dataset {source}:{rest}", hint=f"packaged datasets: {', '.join(SOURCES)}"
    )


def _generated_params(source: str, rest: str, defaults: dict) -> dict:
    params = dict(defaults)
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        if key not in params:
            example = {"shapes": "per_class=40,noise=0.2", "scenes": "per_split=64,size=96",
                       "triplets": "count=32,seed=1"}[source]
            raise UsageError(
                f"{source} has no parameter {key!r}",
                hint=f"e.g. {source}:{example} (parameters: {', '.join(params)})",
            )
        try:
            params[key] = float(value) if isinstance(defaults[key], float) else int(value)
        except ValueError:
            raise UsageError(f"{source} parameter {key}={value!r} is not a number") from None
    return params


def once(final: Path, write: Callable[[Path], object]) -> Path:
    """``final``, written by ``write(tmp)`` into a hidden sibling and renamed, unless it exists."""
    if final.is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    import shutil
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        write(tmp)
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():
                raise
            shutil.rmtree(tmp)  # another process won the race with the same content
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _write_digits(root: Path) -> None:
    import numpy as np
    from sklearn.datasets import load_digits

    from ._png import write_png

    digits = load_digits()
    rng = np.random.default_rng(0)
    # 0..16 ink levels to 0..255, each pixel a 4x4 block (nearest; no resampler in the bytes)
    pixels = (
        np.rint(digits.images * (255 / 16)).astype(np.uint8).repeat(4, axis=1).repeat(4, axis=2)
    )
    for label in range(10):
        members = rng.permutation(np.flatnonzero(digits.target == label))
        n_val = round(len(members) * 0.25)
        for split, chosen in (("val", members[:n_val]), ("train", members[n_val:])):
            for index in chosen:
                write_png(root / split / str(label) / f"{index:04d}.png", pixels[index])


def _write_lfw(root: Path) -> None:
    import numpy as np
    import skimage.data

    from ._png import write_png

    # float images in [0, 1]: the first 100 are faces, the last 100 not (skimage's docs)
    images = np.rint(skimage.data.lfw_subset() * 255).astype(np.uint8)
    rng = np.random.default_rng(0)
    for label, members in (("face", np.arange(100)), ("nonface", np.arange(100, 200))):
        members = rng.permutation(members)
        for split, chosen in (("val", members[:25]), ("train", members[25:])):
            for index in chosen:
                write_png(root / split / label / f"{index:03d}.png", images[index])


def _write_skimage(root: Path) -> None:
    import shutil

    import skimage.data

    # copy the bundled files' bytes: no re-encoding, so the hashes follow skimage's files only
    bundled = Path(skimage.data.__file__).parent
    lines = []
    for name in sorted(SKIMAGE_CAPTIONS):
        found = sorted(bundled.glob(f"{name}.*"))
        if not found:
            raise UsageError(
                f"scikit-image does not ship {name!r} in this version",
                hint="install scikit-image >= 0.22",
            )
        (root / "images").mkdir(exist_ok=True)
        shutil.copyfile(found[0], root / "images" / found[0].name)
        lines.append(
            json.dumps(
                {"image": f"images/{found[0].name}", "captions": [SKIMAGE_CAPTIONS[name]]},
                sort_keys=True,
            )
        )
    (root / "samples.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
