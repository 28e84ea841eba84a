"""What the tests that run CLIP_benchmark's own metric code in-process share: its CUDA-only
code run on the CPU, and its top-k accuracy as it computes it."""

from __future__ import annotations

import torch


def on_cpu(monkeypatch) -> None:
    """CLIP_benchmark asserts CUDA: its ``.cuda()`` a no-op, its ``.to("cuda")`` the CPU."""
    monkeypatch.setattr(torch.nn.Module, "cuda", lambda self, *a, **k: self)
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self, *a, **k: self)
    to = torch.Tensor.to
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *a, **k: to(
        self, *["cpu" if v == "cuda" else v for v in a], **k))


def accuracy(output, target, topk=(1,)):
    """``clip_benchmark.metrics.zeroshot_classification.accuracy``, its ``float()`` of a
    one-element tensor (which numpy 2 refuses) read with ``.item()``."""
    pred = output.topk(max(topk), 1, True, True)[1].t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    return [float(correct[:k].reshape(-1).float().sum(0).item()) / len(target) for k in topk]
