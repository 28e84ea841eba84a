"""How one execution runs (device, progress, executor) and what it measured.

Torch-free, so an execute that a remote's binary cache answers never loads the compute path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Run:
    """How a plan is executed: device, progress, executor, and what the run measured.

    Attributes:
        executor: Extracts features elsewhere (``vbstore.features.make_executor``: Ray); None
            extracts in this process.
        computed: derivation keys this run computed (not found stored or on a remote), in order.
        extracted: images this run sent through the backbone.
        fresh_heads: heads are trained again, not read back (``recompute``).
        made: What each plan step walked so far made, by ``(op, role)`` (see ``Step.make``).
    """

    device: str | None = None
    progress: bool | Callable[..., Any] = True
    batch_size: int = 32
    executor: Any = None
    fresh_heads: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    from_cache: dict[str, bool] = field(default_factory=dict)
    computed: list[str] = field(default_factory=list)
    extracted: int = 0
    # role -> id, images extracted now and rows reused, per feature set read
    features: dict[str, dict[str, Any]] = field(default_factory=dict)
    made: dict[tuple[str, str], Any] = field(default_factory=dict)
