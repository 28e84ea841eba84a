"""Helpers for remote tests: a small lineage built through the public Store API, and probes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from vbstore.heads import save_head
from vbstore.store import derivation_key, derivation_spec


def build_lineage(store, seed: int = 0) -> dict[str, str]:
    """Store a tiny artifact graph with edges and derivations; tag the result ``exp/result``."""
    rng = np.random.default_rng(seed)
    images = [store.put_bytes(rng.bytes(64), "blob") for _ in range(2)]
    manifest = store.put_json(
        {"layout": "folder", "split": "train", "samples": [{"image": i} for i in images]},
        "manifest", edges={"image": images},
    )
    pack_meta = {"format": "vbstore.pack.v1", "extractor": "e" * 64, "layers": "[-1]",
                 "images": json.dumps(images, separators=(",", ":"))}
    pack = store.put_tensors({"pooled.-1": rng.standard_normal((2, 4)).astype(np.float32)}, "pack",
                             pack_meta, edges={"manifest": manifest})
    train = derivation_spec("head", 1, {"pack": pack, "manifest": manifest}, {"lr": 0.1})
    compat = {"backbone": "b" * 64, "weights": "a" * 64, "extractor_key": "e" * 64,
              "pooling": "cls", "layers": [-1], "feature_mode": "pooled", "embed_dim": 4,
              "task": "linear", "task_op_version": 1}
    head = save_head(store, {"weight": rng.standard_normal((3, 4)).astype(np.float32)}, compat)
    store.record(train, head)
    evaluate = derivation_spec("result", 2, {"head": head}, {"split": "val"})
    result = store.put_json(
        {"task": "linear", "op_version": 2, "metrics": {"top1": 0.75}, "params": {},
         "inputs": {"head": head}}, "result")
    store.record(evaluate, result)
    store.tag("exp/result", result)
    return {"images": images, "manifest": manifest, "pack": pack, "head": head, "result": result,
            "train_key": derivation_key(train), "eval_key": derivation_key(evaluate)}


HF_SECRET = "hf_TESTSECRETnotarealtoken42"  # noqa: S105 - a fake the tests check is never leaked
AWS_SECRET = "aws-test-secret-9f3c"  # noqa: S105 - a fake the tests check is never leaked


def all_bytes(root: Path) -> bytes:
    """Every file under ``root`` concatenated (to look for secrets that must not be there)."""
    return b"".join(p.read_bytes() for p in sorted(Path(root).rglob("*")) if p.is_file())


def store_state(store) -> tuple:
    """What a user could see of a store: objects, refs, derivation count, files in objects/."""
    files = sorted(p.name for p in (store.root / "objects").rglob("*") if p.is_file())
    derivations = store.db.one("SELECT count(*) FROM derivations")[0]
    return [o.id for o in store.ls()], store.refs(), derivations, files


def race_once(monkeypatch, remote_class, competitor) -> None:
    """Run ``competitor()`` once, right after a push has read the ref and before it publishes.

    ``existing`` is the call a push makes between reading the ref and publishing, so another
    writer acting there is exactly a concurrent push.
    """
    original = remote_class.existing
    fired = []

    def existing(self, *args, **kwargs):
        if not fired:
            fired.append(True)
            competitor()
        return original(self, *args, **kwargs)

    monkeypatch.setattr(remote_class, "existing", existing)
