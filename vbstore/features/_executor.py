"""Where extraction runs: here (the default) or on a Ray cluster, chosen by one small value.

Building a :class:`RayExecutor` imports neither torch nor ray, so a command given
``--executor ray`` whose features are already stored stays as fast as without it; Ray is
imported only when some image has to go through a backbone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ExecutorError, UsageError

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class RayExecutor:
    """Extract on a Ray cluster; the packs and the featureset are byte-identical to a local run.

    Attributes:
        address: the cluster (``auto``, ``HOST:PORT``, ``ray://HOST:PORT``); None starts a local
            Ray instance unless ``RAY_ADDRESS`` names one.
        sink: where workers write packs: None for this store's ``objects/`` folder (workers must
            see the store's filesystem), or the name of a configured remote (``vbstore remote
            add``) the driver then downloads every pack from, verified.
        workers: forward actors; default one per GPU of the cluster, else one per node. For a
            sweep: units running at once (default: all queued).
        cpus_per_worker: CPUs each actor reserves (and torch threads it runs) without a GPU.
        decode_threads: threads decoding images inside each actor, ahead of the forward.
    """

    address: str | None = None
    sink: str | None = None
    workers: int | None = None
    cpus_per_worker: int = 1
    decode_threads: int = 2

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise UsageError("--ray-workers must be at least 1",
                             hint="omit it for one per GPU or node")
        if self.cpus_per_worker < 1 or self.decode_threads < 1:
            raise UsageError("Ray workers need at least one CPU and one decode thread")

    def connect(self) -> bool:
        """Connect this process to the cluster; True when this call made the connection (so
        ending it, on Ctrl-C, is this process's to do).

        Raises:
            ExecutorError: the cluster cannot be reached.
        """
        import logging  # ray's log level only: logging costs every other command ~3 ms

        import ray  # heavy: only when something runs on Ray

        if ray.is_initialized():
            return False
        try:
            ray.init(address=self.address, log_to_driver=False, logging_level=logging.WARNING)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ExecutorError(
                f"cannot reach the Ray cluster at {self.address or 'RAY_ADDRESS'}: {exc}",
                hint="start one with `ray start --head`, or pass --ray-address HOST:PORT",
            ) from None
        return True

    def unit_resources(self) -> dict[str, float]:
        """What one sweep unit reserves: a GPU when the cluster has any, else CPUs."""
        import ray  # heavy: only when something runs on Ray

        if ray.cluster_resources().get("GPU", 0):
            return {"num_gpus": 1, "num_cpus": 1}
        return {"num_cpus": self.cpus_per_worker}

    def extract(self, store, manifest, plan, backbone_id: str, params, **options: Any
                ) -> dict[str, tuple[str, int]]:
        """Run ``plan.todo`` through the backbone on the cluster; return the new rows."""
        from ._ray import extract_on_ray  # ray and torch: only when something is extracted

        return extract_on_ray(self, store, manifest, plan, backbone_id, params, **options)


def make_executor(name: str | None, address: str | None = None, sink: str | None = None,
                  workers: int | None = None) -> RayExecutor | None:
    """The executor the CLI's ``--executor``/``--ray-address`` ask for (None: extract here).

    Raises:
        UsageError: an unknown executor, or Ray options without ``--executor ray``.
    """
    if name in (None, "local"):
        if address is not None or sink is not None or workers is not None:
            raise UsageError("--ray-address, --ray-sink and --ray-workers need --executor ray",
                             hint="add --executor ray")
        return None
    if name != "ray":
        raise UsageError(f"unknown executor {name!r}", hint=f"use one of: {', '.join(EXECUTORS)}")
    return RayExecutor(address=address, sink=sink, workers=workers)
