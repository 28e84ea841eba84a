"""Fine-tuning's derivations: the specs of a prefix and of a head trained with the last blocks,
their versions, and the fine-tuned weights a head names (a leaf below ``._finetune``, which
plans them, and ``._finetune_compute``/``._finetune_run``, which compute them)."""

from __future__ import annotations

from typing import Any

from ..store import derivation_spec
from ..tasks import Task

# Local imports: heads (the compute path) load only where a stored head is read.

PREFIX_OP_VERSION = 1
FINETUNE_OP_VERSION = 2  # 2: the task's standardize is honoured (1 always standardised)
TRAIN_PARAMS = ("epochs", "lr", "weight_decay", "batch_size")


def prefix_spec(backbone_id: str, manifest_id: str, blocks: int) -> dict[str, Any]:
    """The derivation of the frozen blocks' output over a manifest (the cut is fixed by the
    backbone and the number of trainable blocks)."""
    return derivation_spec("prefix", PREFIX_OP_VERSION,
                           {"backbone": backbone_id, "manifest": manifest_id}, {"blocks": blocks})


def finetune_head_spec(task: Task, task_params: dict[str, Any], backbone_id: str,
                       train_manifest_id: str, extractor: Any, finetune: dict[str, Any],
                       seed: int) -> dict[str, Any]:
    """The derivation of one seed's head trained with the last blocks (its record names the
    fine-tuned weights it made)."""
    return derivation_spec(
        "finetune", FINETUNE_OP_VERSION,
        {"backbone": backbone_id, "train_manifest": train_manifest_id},
        {"task": task.name, "task_op_version": task.op_version, "task_params": task_params,
         "seed": seed, "extractor": extractor.to_dict(), **finetune})


def finetuned_weights(store, head_id: str) -> str:
    """The fine-tuned weights a head was trained with (read from its record, no tensors)."""
    from ..heads import head_record  # heads: the compute path, off a cached answer's

    return head_record(store, head_id)["finetune"]["weights"]
