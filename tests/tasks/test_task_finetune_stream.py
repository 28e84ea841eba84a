"""Fine-tuning streams its stored prefix (issue #25: memory flat in dataset size).

Counted, not timed: every read of prefix rows is at most one batch, the rows read add up to
the passes the recipe makes, and no batch's forward output outlives its step, so what training
holds does not grow with the number of rows. benchmarks/finetune_memory_bench.py measures the
peaks themselves (docs/finetune.md).
"""

from __future__ import annotations

import weakref

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

import vbstore
from vbstore import Store
from vbstore.backbones import Backbone
from vbstore.engine import _finetune_compute
from vbstore.features import PrefixRows
from vbstore.tasks import Recipe, finetune

TOKENS, WIDTH, BATCH, EPOCHS = 5, 4, 8, 2


class Rows:
    """Prefix rows in memory that count each read, and how many batch outputs of the forward
    are alive when it happens."""

    def __init__(self, n: int, outputs: list[weakref.ref]) -> None:
        self.data = torch.randn(n, TOKENS, WIDTH, generator=torch.Generator().manual_seed(n))
        self.outputs = outputs
        self.reads: list[int] = []
        self.alive: list[int] = []

    def __len__(self) -> int:
        return len(self.data)

    def rows(self, index, device="cpu") -> torch.Tensor:
        self.reads.append(len(index))
        self.alive.append(sum(ref() is not None for ref in self.outputs))
        return self.data[torch.as_tensor(index)].clone().to(device)

    def batches(self, batch_size, device="cpu"):
        for start in range(0, len(self), batch_size):
            index = list(range(start, min(start + batch_size, len(self))))
            yield range(index[0], index[-1] + 1), self.rows(index, device)


def _train(n: int) -> Rows:
    outputs: list[weakref.ref] = []
    rows = Rows(n, outputs)
    torch.manual_seed(0)
    block = torch.nn.Linear(WIDTH, WIDTH)

    def forward(x, blocks):
        # the batch's output in memory numpy owns, so that a weak reference sees it freed
        memory = np.empty((len(x), TOKENS, WIDTH), dtype=np.float32)
        outputs.append(weakref.ref(memory))
        tokens = torch.from_numpy(memory).copy_(blocks[0](x))
        return tokens[:, 0]  # the class token: a view of the whole batch's output

    y = torch.arange(n) % 3
    recipe = Recipe(epochs=EPOCHS, lr=1e-2, weight_decay=0.0, batch_size=BATCH, backbone_lr=1e-3,
                    seed=0)
    finetune(rows, y, [block], forward, recipe, n_out=3, loss="cross_entropy", task="t")
    return rows


@pytest.mark.parametrize("n", [32, 256])
def test_training_holds_one_batch_whatever_the_rows(n):
    rows = _train(n)
    assert max(rows.reads) <= BATCH  # never more than a batch of prefix rows at once
    # the standardisation pass, every epoch, the final pass: each row read once per pass
    assert sum(rows.reads) == (EPOCHS + 2) * n
    # what a read finds alive does not grow with n: the batch before (its loss's graph) at most
    assert max(rows.alive) <= 2


@pytest.fixture
def counted(monkeypatch):
    """Every read of stored prefix rows (blob, rows, device), and every other device the
    fine-tuning path was given: the backbone's, the training's."""
    reads: list[tuple[str, int, str]] = []
    devices: list[str] = []
    rows, to, train = PrefixRows.rows, Backbone.to, _finetune_compute.finetune

    def spy_rows(self, index, device="cpu"):
        reads.append((self._oid, len(index), str(device)))
        return rows(self, index, device)

    def spy_to(self, device):
        devices.append(str(device))
        return to(self, device)

    def spy_train(*args, **kwargs):
        devices.append(str(kwargs["device"]))
        return train(*args, **kwargs)

    monkeypatch.setattr(PrefixRows, "rows", spy_rows)
    monkeypatch.setattr(Backbone, "to", spy_to)
    monkeypatch.setattr(_finetune_compute, "finetune", spy_train)
    return reads, devices


def test_a_fine_tuning_run_reads_its_prefixes_a_batch_at_a_time_on_its_device(tmp_path,
                                                                               counted):
    reads, devices = counted
    torch.set_num_threads(1)
    # "cpu:0" is a device string of its own that a dropped --device would not give ("cpu")
    result = vbstore.get_result(
        "test_vit", "classification", "sklearn:digits", "sklearn:digits", split="val",
        train_split="train", limit=2, train_limit=2, weights="random", store=Store(tmp_path),
        progress=False, finetune_blocks=1, batch_size=4, device="cpu:0",
        params={"epochs": EPOCHS, "batch_size": BATCH})
    train, evaluate = (result.record.inputs[r] for r in ("train_prefix", "eval_prefix"))
    on_train = [k for oid, k, _ in reads if oid == train]
    on_eval = [k for oid, k, _ in reads if oid == evaluate]
    assert max(on_train) <= BATCH
    assert sum(on_train) == (EPOCHS + 2) * 20  # 20 train digits
    assert max(on_eval) <= 4  # the run's batch size
    assert sum(on_eval) == 20  # once, through the fine-tuned blocks
    # the blocks, the head and every batch of prefix rows go where the run was asked to
    assert {device for *_, device in reads} == {"cpu:0"}
    assert set(devices) == {"cpu:0"}  # and not empty


def test_prefix_rows_read_what_was_stored(tmp_path):
    result = vbstore.get_result(
        "test_vit", "classification", "sklearn:digits", "sklearn:digits", split="val",
        train_split="train", limit=1, train_limit=1, weights="random", store=Store(tmp_path),
        progress=False, finetune_blocks=2, params={"epochs": 1})
    store, oid = Store(tmp_path), result.record.inputs["train_prefix"]
    rows = PrefixRows(store, oid)
    whole = load_file(store.path(oid))["activations"]
    index = [7, 0, 3, 4, 5, 9]  # any order, runs of consecutive rows and single ones
    assert np.array_equal(rows.rows(index).numpy(), whole[index])
    assert np.array_equal(rows.rows(torch.tensor([], dtype=torch.long)).numpy(), whole[:0])
    assert rows.rows_read == len(index)
    with pytest.raises(IndexError):
        rows.rows([len(rows)])
