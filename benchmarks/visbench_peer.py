"""The VisBench side of ``dense_bench.py --visbench PYTHON``: run by the peer's own interpreter.

Never imported by vbstore or its tests: VisBench (PyPI ``visbench``) lives in a scratch venv
and is only a yardstick. One call runs one probe in a fresh process, as a user would:

    PYTHON benchmarks/visbench_peer.py CONFIG.json TASK CACHE_DIR [SEED]

CONFIG (written by dense_bench.py) names the checkpoint, the timm architecture, the input
size, the preprocessing vbstore recorded for the same backbone (mean, std) and the data. The
model is a timm ViT with the checkpoint's tensors, wrapped in VisBench's ``CustomBackbone``;
its dense features are the final block's normalised patch tokens, the map vbstore stores.
Prints one JSON line: metrics, seconds inside the call, and the feature-cache hits and misses.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

started = time.perf_counter()
import timm  # noqa: E402  (timed: a user's process pays for its imports)
import torch  # noqa: E402
import visbench  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from torchvision import transforms  # noqa: E402
from visbench.cache import FeatureCache  # noqa: E402
from visbench.data.dense import DenseFolderDataset, load_label_map, load_mask  # noqa: E402

TARGETS = {"semantic_segmentation": ("labels", load_label_map, {"num_classes": 4}),
           "generic_segmentation": ("masks", load_mask, {})}


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    task, cache_dir = sys.argv[2], Path(sys.argv[3])
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    torch.set_num_threads(config["threads"])
    model = timm.create_model(config["arch"], pretrained=False, img_size=config["size"])
    model.load_state_dict(load_file(config["checkpoint"]))
    patch = model.patch_embed.patch_size[0]

    def features(module, images):
        tokens = module.forward_features(images)  # final block, after the final norm
        grid = (images.shape[-2] // patch, images.shape[-1] // patch)
        return tokens[:, 1:], tokens[:, 0], grid

    preprocess = transforms.Compose([transforms.ToTensor(),
                                     transforms.Normalize(config["mean"], config["std"])])
    backbone = visbench.CustomBackbone(model, preprocess, name="bench_vit", has_cls_token=True,
                                       patch_size=patch, feature_fn=features,
                                       image_size=config["size"], device="cpu")
    folder, loader, task_kwargs = TARGETS[task]
    data = {split: DenseFolderDataset(Path(config["data"]) / split, image_dir="images",
                                      target_dir=folder, split=split, image_size=config["size"],
                                      target_loader=loader)
            for split in ("train", "val")}
    cache = FeatureCache(root=cache_dir)
    begin = time.perf_counter()
    result = visbench.run(backbone, task, data["val"], train_dataset=data["train"], cache=cache,
                          seed=seed, batch_size=config["batch"], **task_kwargs)
    print(json.dumps({"metrics": {k: float(v) for k, v in result.metrics.items()
                                  if isinstance(v, (int, float))},
                      "call_seconds": time.perf_counter() - begin,
                      "process_seconds": time.perf_counter() - started,
                      "cache": cache.stats()}))


if __name__ == "__main__":
    main()
