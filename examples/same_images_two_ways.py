"""The same images as a folder and as WebDataset shards: one set of image ids, one extraction.

Runs offline in a few seconds with a tiny random-weight test backbone:

    VBSTORE_HOME=/tmp/vbstore-example python examples/same_images_two_ways.py
"""

from __future__ import annotations

import io
import tarfile
import tempfile
from pathlib import Path

import vbstore
from vbstore.data import load_manifest, make_shapes


def write_shards(folder: Path, out: Path) -> None:
    """``folder/<class>/<file>.png`` as CLIP_benchmark's ``out/val/0.tar`` + classnames.txt."""
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
    (out / "val").mkdir(parents=True)
    with tarfile.open(out / "val" / "0.tar", "w") as tar:
        for index, name in enumerate(classes):
            for image in sorted((folder / name).iterdir()):
                for suffix, data in ((".png", image.read_bytes()), (".cls", str(index).encode())):
                    info = tarfile.TarInfo(f"{name}-{image.stem}{suffix}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    (out / "classnames.txt").write_text("\n".join(classes) + "\n")


def main() -> None:
    # the example's images go when it ends (the store keeps their manifests and features)
    with tempfile.TemporaryDirectory(prefix="vbstore-example-") as tmp:
        run(Path(tmp))


def run(work: Path) -> None:
    shapes = make_shapes(work / "shapes", per_class=3, size=32)
    write_shards(shapes / "val", work / "wds")
    store = vbstore.Store()
    folder = load_manifest(store, shapes, split="val")
    shards = load_manifest(store, f"wds:{work / 'wds'}", split="val")
    print(f"folder {folder.id[:12]}  shards {shards.id[:12]}  "
          f"same images: {sorted(folder.image_ids) == sorted(shards.image_ids)}")
    for name, data, split in (("folder", str(shapes), "val"), ("shards", f"wds:{work / 'wds'}",
                                                               "val")):
        result = vbstore.get_features("test_cnn", data, split=split, store=store,
                                      weights="random", input_size=32, progress=False)
        print(f"{name:<7} extracted {result.stats.get('extracted', 0):>2}  "
              f"reused {result.stats.get('reused', 0):>2}  from cache {result.from_cache}")


if __name__ == "__main__":
    main()
