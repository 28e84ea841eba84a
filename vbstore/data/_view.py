"""A stored manifest together with the folder its relative names resolve against."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError

if TYPE_CHECKING:
    import numpy as np
    from PIL import Image

# Local imports: PIL and numpy load when an image or a target matrix is read, never for the
# document.


class ManifestView:
    """One split: the manifest document, its id, and where its files are on this machine.

    The manifest itself is location-independent; ``root`` is what ties it to this machine.
    A view of an unchanged folder reads its document from the store on first use: a cached
    result needs the manifest's id and size, not its 100k samples.

    ```python
    view = load_manifest(store, "data/", split="val")
    image = view.load_image(0)                  # PIL RGB
    labels = torch.tensor(view.labels())        # (N,) class indices
    ```
    """

    __slots__ = ("_doc", "_read", "_size", "files", "id", "root")

    def __init__(self, root: Path, id: str, doc: dict[str, Any] | None = None, *,
                 read: Callable[[], dict[str, Any]] | None = None,
                 size: int | None = None,
                 files: tuple[list[str], Sequence[int]] | None = None) -> None:
        if (doc is None) == (read is None):
            raise ValueError("give the document or a way to read it, not both")
        self.root = root
        self.id = id
        self._doc = doc
        self._read = read
        self._size = size
        #: the split's files as this process listed them under ``root``: their names (each
        #: sample's image, then its target) and their (dev, inode, size, mtime, ctime), five
        #: numbers apiece; None for a view that was not listed from a folder here
        self.files = files

    def __repr__(self) -> str:
        return f"ManifestView(root={str(self.root)!r}, id={self.id!r})"

    def __reduce__(self) -> tuple[Any, ...]:  # a loader worker gets the document, not the store
        return (ManifestView, (self.root, self.id, self.doc))

    @property
    def doc(self) -> dict[str, Any]:
        """The manifest document (read, and its hash checked, on first use)."""
        if self._doc is None:
            assert self._read is not None  # set whenever doc is not
            self._doc, self._read = self._read(), None
        return self._doc

    @classmethod
    def open(cls, store, ref: str, root: str | Path) -> ManifestView:
        """A stored manifest (id, prefix or ref) read against ``root``.

        Raises:
            ObjectNotFound: no such manifest.
            UsageError: the object is not a manifest.
        """
        oid = store.resolve(ref)
        kind = store.info(oid).kind
        if kind != "manifest":
            raise UsageError(f"{oid[:12]} is a {kind}, not a manifest")
        return cls(Path(root).resolve(), oid, store.read_json(oid))

    # ---- the document --------------------------------------------------------------------
    # These accessors are the data layer's typed reader of manifest documents: each field is
    # named here once (vbstore.records.ManifestRecord holds the same fields as a record, for
    # the layers above data).

    @property
    def layout(self) -> str:
        return self.doc["layout"]

    @property
    def split(self) -> str | None:
        return self.doc.get("split")

    @property
    def classes(self) -> list[str]:
        return list(self.doc.get("classes", []))

    @property
    def target_type(self) -> str | None:
        return self.doc.get("target_type")

    @property
    def digest(self) -> str | None:
        return self.doc.get("digest")

    @property
    def samples(self) -> list[dict[str, Any]]:
        return self.doc["samples"]

    @property
    def limit(self) -> int | None:
        return self.doc.get("limit")

    @property
    def triplets(self) -> list[list[int]]:
        """``[ref, left, right, left_vote, right_vote]`` rows (a triplets layout), or []."""
        return self.doc.get("triplets") or []

    @property
    def pairs(self) -> list[list[float]]:
        """``[a, b, qw, qx, qy, qz, tx, ty, tz]`` rows (a pairs layout), or []."""
        return self.doc.get("pairs") or []

    @property
    def keypoint_pairs(self) -> list[list[Any]]:
        """Annotated keypoint pairs (a keypoint-pairs layout), or []."""
        return self.doc.get("keypoint_pairs") or []

    @property
    def names(self) -> list[str]:
        """Relative sample names, sorted."""
        return [s["name"] for s in self.samples]

    @property
    def image_ids(self) -> list[str]:
        """BLAKE3 of each image file: the ids feature rows are keyed by."""
        return [s["image"] for s in self.samples]

    def __len__(self) -> int:
        if self._doc is None and self._size is not None:
            return self._size
        return len(self.samples)

    # ---- files ---------------------------------------------------------------------------

    def image_path(self, i: int) -> Path:
        return self.root / self.samples[i]["name"]

    def load_image(self, i: int) -> Image.Image:
        """Sample ``i``'s image, decoded and converted to RGB."""
        from PIL import Image

        with Image.open(self.image_path(i)) as image:
            return image.convert("RGB")

    def target_path(self, i: int) -> Path:
        """Sample ``i``'s target file (dense layouts and lists with a ``target`` column).

        Raises:
            UsageError: the manifest has no target files.
        """
        name = self.samples[i].get("target_name")
        if name is None:
            raise UsageError(
                f"manifest {self.id[:12]} has no target files ({self.target_type} targets)"
            )
        return self.root / name

    def target_paths(self) -> list[Path]:
        return [self.target_path(i) for i in range(len(self))]

    # ---- targets -------------------------------------------------------------------------

    def _index_map(self, classes: Sequence[str] | None) -> list[int] | None:
        """Where each of this manifest's class indices lands in ``classes`` (None: unchanged)."""
        if classes is None or list(classes) == self.classes:
            return None
        position = {name: i for i, name in enumerate(classes)}
        used = {
            self.classes[i]
            for s in self.samples
            for i in ([s["label"]] if "label" in s else s.get("labels", []))
        }
        missing = sorted(used - set(position))
        if missing:
            raise UsageError(
                f"classes {', '.join(missing[:5])} of manifest {self.id[:12]} are not in "
                "the given class list",
                hint="train and evaluate on the same classes",
            )
        return [position.get(name, -1) for name in self.classes]

    def _refuse_unlabelled(self) -> None:
        if self.layout == "images":
            raise UsageError(f"{self.root} is a flat folder of unlabelled images, and this task "
                             "needs labels",
                             hint="put each image in a folder named after its class: "
                                  "root/<class>/<image>")

    def labels(self, classes: Sequence[str] | None = None) -> list[int]:
        """Class index per sample, ready for ``torch.tensor(..., dtype=torch.long)``.

        Args:
            classes: Index into this class list instead (e.g. a head's), matched by name.

        Raises:
            UsageError: the manifest is not single-label, or a used class is not in ``classes``.
        """
        self._refuse_unlabelled()
        if any("label" not in s for s in self.samples):
            raise UsageError(
                f"manifest {self.id[:12]} has {self.target_type} targets, not one label per sample"
            )
        remap = self._index_map(classes)
        return [s["label"] if remap is None else remap[s["label"]] for s in self.samples]

    def multi_hot(self, classes: Sequence[str] | None = None) -> np.ndarray:
        """(N, K) uint8 matrix, one column per class (single-label manifests give one-hot rows).

        Raises:
            UsageError: the manifest has no class labels.
        """
        import numpy as np

        self._refuse_unlabelled()
        if not all("label" in s or "labels" in s for s in self.samples):
            raise UsageError(f"manifest {self.id[:12]} has {self.target_type} targets, not labels")
        remap = self._index_map(classes)
        width = len(self.classes if classes is None else classes)
        matrix = np.zeros((len(self), width), dtype=np.uint8)
        for row, sample in enumerate(self.samples):
            for index in [sample["label"]] if "label" in sample else sample["labels"]:
                matrix[row, index if remap is None else remap[index]] = 1
        return matrix

    def captions(self) -> list[list[str]]:
        """The captions of each image (image-caption lists)."""
        if any("captions" not in s for s in self.samples):
            raise UsageError(
                f"manifest {self.id[:12]} has {self.target_type} targets, not captions"
            )
        return [list(s["captions"]) for s in self.samples]

    def conditions(self) -> list[str | None]:
        return [s.get("condition") for s in self.samples]

    def counts(self) -> dict[str, int]:
        """Samples per class (a multi-label sample counts once for each of its labels)."""
        counts = dict.fromkeys(self.classes, 0)
        for sample in self.samples:
            for index in [sample["label"]] if "label" in sample else sample.get("labels", []):
                counts[self.classes[index]] += 1
        return counts

    def summary(self) -> dict[str, Any]:
        """What ``vbstore get manifest`` prints."""
        conditions = sorted({c for c in self.conditions() if c is not None})
        return {
            "id": self.id,
            "digest": self.digest,
            "root": str(self.root),
            "layout": self.layout,
            "split": self.split,
            "target_type": self.target_type,
            "limit": self.limit,
            "samples": len(self),
            "classes": self.classes,
            "per_class": self.counts(),
            "conditions": conditions,
        }
