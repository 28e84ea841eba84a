"""open_clip's published results tables as *reported* evaluations, one suite per dataset.

The open_clip authors publish CLIP_benchmark figures for their checkpoints as CSV tables
(``docs/openclip_results.csv``, ``openclip_classification_results.csv``,
``openclip_retrieval_results.csv``): one row per ``name``/``pretrained`` pair, one column per
dataset (or per retrieval metric). Each cell becomes an evaluation of the checkpoint
``open_clip:NAME@PRETRAINED`` (pretrained weights, the id a CLIP_benchmark result file imports
as) on the dataset's suite ``openclip-<dataset>@1``, with its source (file, line, column, and
the open_clip commit when the file is byte-identical to a known copy).

What the tables do not say, the evaluations lack: no manifest of the samples (``data``), no
prompts or CLIP_benchmark version (``protocol``, ``evaluator``): reported evidence. The sample
count is the dataset's test split size, given here (``Dataset.test_size``), never read from the
file, and each source says so (``vouched``). A dataset whose test split size vbstore does not
know has no suite unless the caller gives it (``sample_counts``).

A cell of exactly 0.0000 is read as *not evaluated*, not as a score: all 31 such cells are FMoW,
a 62-class problem where chance is 1.6%, among them OpenAI's RN50, which scores far above chance
on every neighbouring dataset. No evaluation is recorded for it; the import lists it as skipped.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..interop import clip_benchmark_identity
from ..store import Store
from ._evaluate import Evaluation, build, record
from ._suite import Suite, normalize, push_suite

REPOSITORY = "mlfoundations/open_clip"
COMMIT = "89fb801f1e6087880e951fc8354b8a2077b79c6d"
# the files as published at COMMIT (docs/<name>): a byte-identical file names that commit
KNOWN_COPIES = {
    "6b3f9313e2e24691b31ab69b534b2553165be1a975dd149ee9b4a7facb384d21": "openclip_results.csv",
    "9cc4f1ca941d99004819310175f19b6f9031c1590d96650ae72a42f7daba93ac":
        "openclip_classification_results.csv",
    "8510a387b20b1d0aba44143afeab737a5d0bdfbb8762bd6c5a24ca220bd3bbd1":
        "openclip_retrieval_results.csv",
}
CONDITION = "test"
NOT_EVALUATED = 0.0
_KEY = ("name", "pretrained")


@dataclass(frozen=True)
class Dataset:
    """One dataset of the tables: its column (a retrieval dataset's column prefix), its
    CLIP_benchmark name, its task and its test split size (None: not known to vbstore)."""

    column: str
    name: str
    label: str
    test_size: int | None
    task: str = "zeroshot_classification"

    @property
    def slug(self) -> str:
        return "openclip-" + self.name.replace("/", "-").replace("_", "-").lower()

    @property
    def ref(self) -> str:
        return f"{self.slug}@1"

    def metrics(self) -> dict[str, str]:
        """Suite metric key -> the column holding it (the first is the headline)."""
        if self.task == "zeroshot_retrieval":
            return {f"{side}_retrieval_recall@{k}": f"{self.column} {side} retr. R@{k}"
                    for side in ("image", "text") for k in (1, 5, 10)}
        return {"acc1": self.column}


# Test split sizes as CLIP_benchmark loads each dataset (its VTAB, WILDS and torchvision splits;
# retrieval: images of the Flickr30k 1k and MSCOCO 5k Karpathy test splits)
DATASETS = (
    Dataset("ImageNet 1k", "imagenet1k", "ImageNet-1k val", 50000),
    Dataset("Caltech-101", "vtab/caltech101", "Caltech-101 (VTAB split)", 6084),
    Dataset("CIFAR-10", "cifar10", "CIFAR-10", 10000),
    Dataset("CIFAR-100", "vtab/cifar100", "CIFAR-100 (VTAB split)", 10000),
    Dataset("CLEVR Counts", "vtab/clevr_count_all", "CLEVR counts (VTAB)", 15000),
    Dataset("CLEVR Distance", "vtab/clevr_closest_object_distance", "CLEVR distance (VTAB)",
            15000),
    Dataset("Country211", "country211", "Country211", 21100),
    Dataset("Describable Textures", "vtab/dtd", "Describable Textures (VTAB)", 1880),
    Dataset("EuroSAT", "vtab/eurosat", "EuroSAT (VTAB split)", 5400),
    Dataset("FGVC Aircraft", "fgvc_aircraft", "FGVC Aircraft", 3333),
    Dataset("Food-101", "food101", "Food-101", 25250),
    Dataset("GTSRB", "gtsrb", "GTSRB", 12630),
    Dataset("ImageNet Sketch", "imagenet_sketch", "ImageNet Sketch", 50889),
    Dataset("ImageNet v2", "imagenetv2", "ImageNet v2 (matched frequency)", 10000),
    Dataset("ImageNet-A", "imagenet-a", "ImageNet-A", 7500),
    Dataset("ImageNet-O", "imagenet-o", "ImageNet-O", 2000),
    Dataset("ImageNet-R", "imagenet-r", "ImageNet-R", 30000),
    Dataset("KITTI Vehicle Distance", "vtab/kitti_closest_vehicle_distance",
            "KITTI closest vehicle distance (VTAB)", 711),
    Dataset("MNIST", "mnist", "MNIST", 10000),
    Dataset("ObjectNet", "objectnet", "ObjectNet (the 113 ImageNet classes)", 18574),
    Dataset("Oxford Flowers-102", "vtab/flowers", "Oxford Flowers-102 (VTAB)", 6149),
    Dataset("Oxford-IIIT Pet", "vtab/pets", "Oxford-IIIT Pet (VTAB)", 3669),
    Dataset("Pascal VOC 2007", "voc2007", "Pascal VOC 2007 (object crops)", None),
    Dataset("PatchCamelyon", "vtab/pcam", "PatchCamelyon (VTAB)", 32768),
    Dataset("Rendered SST2", "renderedsst2", "Rendered SST2", 1821),
    Dataset("RESISC45", "vtab/resisc45", "RESISC45 (VTAB split)", 6300),
    Dataset("Stanford Cars", "cars", "Stanford Cars", 8041),
    Dataset("STL-10", "stl10", "STL-10", 8000),
    Dataset("SUN397", "sun397", "SUN397", None),
    Dataset("SVHN", "vtab/svhn", "SVHN (VTAB)", 26032),
    Dataset("iWildCam", "wilds/iwildcam", "iWildCam (WILDS test)", 42791),
    Dataset("Camelyon17", "wilds/camelyon17", "Camelyon17 (WILDS test)", 85054),
    Dataset("FMoW", "wilds/fmow", "FMoW (WILDS test)", 22108),
    Dataset("Dollar Street", "dollar_street", "Dollar Street", None),
    Dataset("GeoDE", "geode", "GeoDE", None),
    Dataset("Flickr", "flickr30k", "Flickr30k (1k test images)", 1000, "zeroshot_retrieval"),
    Dataset("MSCOCO", "mscoco_captions", "MSCOCO captions (5k test images)", 5000,
            "zeroshot_retrieval"),
)
# columns that are not one dataset's figure, and why they are not imported
LEFT_OUT = {
    "params (M)": "a model size, not a result",
    "FLOPs (B)": "a model cost, not a result",
    "Average perf. on 38 datasets": "an average over datasets, not one dataset's figure",
    "Average perf. on 35 datasets": "an average over datasets, not one dataset's figure",
    "Average score": "an average over datasets, not one dataset's figure",
    # openclip_results.csv: the mean of image and text recall@1, which the retrieval table holds
    "Flickr": "a mean of image and text recall@1; imported from openclip_retrieval_results.csv",
    "MSCOCO": "a mean of image and text recall@1; imported from openclip_retrieval_results.csv",
    "WinoGAViL": "a Jaccard score of a task vbstore does not run, on an unknown sample count",
}


def dataset(name: str) -> Dataset:
    """A dataset by its CLIP_benchmark name, suite slug or column.

    Raises:
        UsageError: none of the tables' datasets.
    """
    for ds in DATASETS:
        if name in (ds.name, ds.slug, ds.column, ds.ref):
            return ds
    raise UsageError(f"{name!r} is not a dataset of open_clip's tables",
                     hint="one of " + ", ".join(d.name for d in DATASETS))


def suite_document(ds: Dataset, sample_count: int) -> dict[str, Any]:
    """The suite the published figures of ``ds`` rank on: the task, its test split, the
    table's metrics; the data is external (no manifest: the tables name none)."""
    metrics = [{"key": key, "direction": "max", "unit": "fraction", "range": {"min": 0, "max": 1},
                "headline": i == 0} for i, key in enumerate(ds.metrics())]
    return {
        "slug": ds.slug,
        "version": 1,
        "name": f"{ds.label}, zero-shot, as open_clip publishes it (CLIP_benchmark's "
                f"{ds.name!r}; the published figures, and your runs on the same data)",
        "protocol": {
            "task": ds.task,
            "weights": "pretrained",
            "split": CONDITION,
            "data": {"kind": "external",
                     "label": f"{ds.label}, test split as CLIP_benchmark loads {ds.name!r}"},
            "conditions": [{"name": CONDITION, "sampleCount": sample_count}],
            "metrics": metrics,
            "aggregation": "equal-mean-of-conditions",
        },
    }


@dataclass
class TableImport:
    """What one table's import recorded, skipped and left out."""

    file: str
    commit: str | None
    suites: list[str] = field(default_factory=list)
    evaluations: list[Evaluation] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "commit": self.commit,
            "suites": self.suites,
            "evaluations": len(self.evaluations),
            "new": sum(e.new for e in self.evaluations),
            "ranked": sum(e.ranked for e in self.evaluations),
            "skipped": self.skipped,
            "left_out": self.left_out,
        }


def is_openclip_table(path: str | Path) -> bool:
    """Whether a file reads as one of open_clip's results tables (``name,pretrained,...``)."""
    file = Path(path)
    if file.suffix.lower() != ".csv":
        return False
    try:
        with file.open(encoding="utf-8", newline="") as handle:
            header = next(csv.reader(handle), [])
    except (OSError, UnicodeDecodeError):
        return False
    return tuple(header[:2]) == _KEY


def read_table(path: str | Path) -> tuple[list[str], list[dict[str, str]], str | None]:
    """The header, the rows (each with its ``_line``) and the open_clip commit of a table.

    Raises:
        UsageError: unreadable, or not a ``name,pretrained,...`` table.
    """
    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {file}: {exc.strerror}") from None
    digest = hashlib.sha256(raw).hexdigest()
    commit = COMMIT if KNOWN_COPIES.get(digest) == file.name else None
    try:
        lines = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise UsageError(f"{file.name} is not UTF-8 text") from None
    reader = csv.reader(lines)
    header = next(reader, [])
    if tuple(header[:2]) != _KEY:
        raise UsageError(f"{file.name} is not one of open_clip's results tables",
                         hint="its first columns are name,pretrained (open_clip's docs/*.csv)")
    rows = []
    for number, cells in enumerate(reader, start=2):
        if not cells:
            continue
        if len(cells) != len(header):
            raise UsageError(f"{file.name} line {number} has {len(cells)} cells, the header "
                             f"{len(header)}", hint="the file was cut or edited; use the "
                             "published table")
        rows.append({**dict(zip(header, cells, strict=True)), "_line": str(number)})
    return header, rows, commit


def import_table(
    store: Store,
    path: str | Path,
    *,
    sample_counts: Mapping[str, int] | None = None,
    dry_run: bool = False,
    recorded: float | None = None,
) -> TableImport:
    """Record every figure of an open_clip results table on its dataset's suite.

    ``sample_counts`` (CLIP_benchmark dataset name -> test split size) gives the size of a
    dataset vbstore does not know (VOC 2007, SUN397, Dollar Street, GeoDE); without one, that
    dataset is left out and said so. ``recorded`` fixes the recording time (the reference
    registry's clock): every evaluation of the table gets it.

    Raises:
        UsageError: not a table, a cell that is not a number, a count for an unknown dataset
            or one that contradicts the known size.
        SuiteConflict: a suite of that slug exists with another protocol.
    """
    header, rows, commit = read_table(path)
    name = Path(path).name
    given = dict(sample_counts or {})
    for key, count in given.items():
        ds = dataset(key)
        if ds.test_size is not None and ds.test_size != count:
            raise UsageError(f"{ds.name}'s test split has {ds.test_size} samples, not {count}",
                             hint=f"drop --sample-count {key}=...")
    out = TableImport(file=name, commit=commit)
    columns = set(header)
    present = [ds for ds in DATASETS if all(c in columns for c in ds.metrics().values())]
    used = {c for ds in present for c in ds.metrics().values()} | set(_KEY)
    for column in header:
        if column not in used:
            out.left_out[column] = LEFT_OUT.get(column.split(" ")[0] if column.startswith(
                "WinoGAViL") else column, "not a dataset vbstore knows")
    for ds in present:
        size = ds.test_size or next((v for k, v in given.items() if dataset(k) == ds), None)
        if size is None:
            out.left_out[ds.column] = (f"the test split size of {ds.name} is not known to "
                                       f"vbstore; give it: --sample-count {ds.name}=N")
            continue
        suite = _suite(store, ds, size, dry_run)
        out.suites.append(suite.ref)
        for row in rows:
            evaluation = _evaluation(store, suite, ds, row, name, commit, dry_run, recorded)
            if isinstance(evaluation, dict):
                out.skipped.append(evaluation)
            else:
                out.evaluations.append(evaluation)
    return out


def _suite(store: Store, ds: Dataset, count: int, dry_run: bool) -> Suite:
    doc = suite_document(ds, count)
    if dry_run:  # judged against the suite it would push, nothing stored
        return Suite("0" * 64, normalize(doc))
    suite, _ = push_suite(store, doc)
    return suite


def _evaluation(store: Store, suite: Suite, ds: Dataset, row: dict[str, str], file: str,
                commit: str | None, dry_run: bool, recorded: float | None
                ) -> Evaluation | dict[str, Any]:
    label = f"{row['name']},{row['pretrained']}"
    values = {}
    for key, column in ds.metrics().items():
        try:
            values[key] = float(row[column])
        except ValueError:
            raise UsageError(f"{file} line {row['_line']}, column {column!r}: "
                             f"{row[column]!r} is not a number") from None
    if all(v == NOT_EVALUATED for v in values.values()):
        return {"checkpoint": label, "dataset": ds.name, "line": int(row["_line"]),
                "why": "0.0000 is read as not evaluated"}
    identity = clip_benchmark_identity({"model": row["name"], "pretrained": row["pretrained"]},
                                       f"{file} line {row['_line']}")
    source = {
        "format": "openclip_table",
        "file": file,
        "line": int(row["_line"]),
        "columns": sorted(ds.metrics().values()),
        "dataset": ds.name,
        "repository": REPOSITORY,
        **({"commit": commit, "path": f"docs/{file}"} if commit else {}),
        "vouched": ["sample_count"],
        "notes": "open_clip's table names no CLIP_benchmark version, prompts or manifest; the "
                 "sample count is the test split size vbstore gives the dataset",
    }
    doc = build(suite, checkpoint=identity.checkpoint(), results={CONDITION: {"overall": values}},
                sample_counts={CONDITION: suite.conditions[0]["sampleCount"]},
                sources={CONDITION: source})
    return record(store, doc, dry_run=dry_run, recorded=recorded)
