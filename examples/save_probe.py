"""Save a trained probe, then watch it refused where it does not fit: on purpose.

VisBench's ``--save-probe`` writes the trained head with the backbone's identity beside it, so a
head can never be applied to features it was not trained on. vbstore's ``run TASK --save-probe
PATH`` writes the same: a safetensors file whose compatibility record names the backbone's
weights, input size, pooling and layers. This script trains a classification head on a tiny
random-weight backbone, saves it, applies it to the same backbone (the same numbers), then to
the same architecture with other weights: refused with exit code 11 and the reason, before any
number is computed. Runs offline in a few seconds:

    VBSTORE_HOME=/tmp/vbstore-example python examples/save_probe.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import vbstore
from vbstore.data import make_shapes
from vbstore.errors import HeadMismatch
from vbstore.heads import export_head, import_head


def main() -> None:
    # the example's images and second store go when it ends
    with tempfile.TemporaryDirectory(prefix="vbstore-save-probe-") as tmp:
        run(Path(tmp))


def run(work: Path) -> None:
    shapes = str(make_shapes(work / "shapes", per_class=4, size=32))
    common = {"split": "val", "train_split": "train", "weights": "random", "progress": False}
    store = vbstore.Store()
    trained = vbstore.get_result("test_vit", "classification", shapes, shapes, store=store,
                                 params={"epochs": 20}, backbone_seed=0, **common)
    head = trained.record.inputs["head"]
    saved = work / "probe.safetensors"  # what `vbstore run classification --save-probe` writes
    export_head(store, head, saved)
    print(f"trained top1 {trained.metrics['top1']:.4f}; saved head {head[:12]} to {saved.name}")

    # another store (another machine): the file is checked as it comes in
    elsewhere = vbstore.Store(work / "elsewhere")
    imported = import_head(elsewhere, saved, name="probe").id
    again = vbstore.get_result("test_vit", "classification", shapes, store=elsewhere,
                               head=imported, backbone_seed=0,
                               **{k: v for k, v in common.items() if k != "train_split"})
    assert again.metrics == trained.metrics, "the same head on the same features"
    print(f"applied to the backbone it was trained on: top1 {again.metrics['top1']:.4f}")

    try:  # the same architecture, other weights: the mismatch on purpose
        vbstore.get_result("test_vit", "classification", shapes, store=elsewhere, head=imported,
                           backbone_seed=1,
                           **{k: v for k, v in common.items() if k != "train_split"})
    except HeadMismatch as refused:
        print(f"applied to other weights: refused (exit {refused.exit_code}): {refused}")
    else:
        raise SystemExit("a head was applied to weights it was not trained on")


if __name__ == "__main__":
    main()
