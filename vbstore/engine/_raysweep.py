"""A sweep on a Ray cluster: each backbone x task unit one Ray task, the store's leases keeping
every derivation to one computation however many drivers sweep the same grid.

The driver plans each unit (ids only) and answers a stored result itself, without Ray. Every
other unit becomes a Ray task that reserves what one unit needs (a GPU when the cluster has
any, else ``cpus_per_worker`` CPUs), opens the store at the driver's root and runs
:func:`execute` there. A worker must therefore be on the driver's machine (the registry is
SQLite in WAL mode and the leases are ``flock``s, both of one kernel); one elsewhere says so.
The features and heads below the result are derived under the store's leases, so a unit never
computes what another process is computing: it waits for the answer and reads it. The result's
own lease is only tried: a unit whose result another driver is computing comes back busy at
once and is queued again behind the others, then waits for that answer, so two drivers on one
grid split it between them instead of queueing behind each other. A retried task is harmless:
its dead worker's leases are released by the kernel, and what it wrote is content-addressed.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data import decode_once
from ..errors import ExecutorError, LeaseTimeout, UsageError, VbstoreError
from ..store import Store
from ..tasks import ordered_metrics
from ._plan import plan
from ._requests import ResultRequest
from ._results import Result, execute, stored_result


@dataclass(frozen=True)
class Unit:
    """One backbone x task of a sweep: its row's labels and its request (None: ``error``)."""

    row: dict[str, Any]
    request: ResultRequest | None
    error: str | None = None


def result_fields(task: str, result: Result) -> dict[str, Any]:
    """What a sweep row says about a result."""
    return {"id": result.id, "from_cache": result.from_cache,
            "metrics": ordered_metrics(task, result.metrics, result.record.params),
            "computed": list(result.computed),
            "extracted": result.extracted}


def machine() -> str:
    """This kernel: host name and boot id (two Ray nodes of one machine share it)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}"


def run_unit(root: str, request: ResultRequest, wait: bool, driver: str | None = None,
             batch_size: int = 32) -> dict[str, Any]:
    """One unit on a Ray worker (``batch_size`` images per forward pass); ``{"busy": True}``
    when another process computes its result and ``wait`` is False. ``driver`` is the
    driver's :func:`machine`: the registry (SQLite in WAL mode) and the leases (``flock``)
    hold only among processes of one kernel."""
    if driver is not None and machine() != driver:
        return {"error": f"the Ray worker on {socket.gethostname()} is not on the store's "
                         f"machine ({driver.split('/')[0]}); a sweep's units run where its "
                         "registry is (SQLite and the leases need one kernel): give the cluster "
                         "only that machine's GPUs, or extract with `get features --executor "
                         "ray` across nodes"}
    if not (Path(root) / "registry.db").is_file():  # Store() would make an empty one here
        return {"error": f"the Ray worker on {socket.gethostname()} cannot see the store at "
                         f"{root}; sweeps on Ray need the store on the workers' filesystem"}
    with Store(root) as store:
        try:
            with decode_once():  # one unit is one request
                result = execute(plan(request, store), progress=False,
                                 lease_timeout=None if wait else 0, batch_size=batch_size)
        except LeaseTimeout:
            return {"busy": True}
        except VbstoreError as exc:
            return {"error": str(exc)}
    return result_fields(request.probe.task, result)


def sweep_on_ray(executor, store: Store, units: Sequence[Unit], batch_size: int = 32
                 ) -> Iterator[dict[str, Any]]:
    """Yield one row per unit as it finishes (stored results first), with ``done``/``total``;
    each computed on a worker with ``batch_size`` images per forward pass.

    ``executor.workers`` caps the units running at once (default: all queued, Ray schedules
    them on the resources free). On Ctrl-C (or any error) the unfinished tasks are cancelled,
    and the connection ended when this call made it, so no worker of this sweep goes on writing.

    Raises:
        UsageError: ``executor.sink`` is set (a sweep's workers write through the shared store).
        ExecutorError: the cluster cannot be reached, or a unit's task failed for good.
    """
    if executor.sink is not None:
        raise UsageError("a sweep on Ray takes no --ray-sink: its workers write to the store "
                         "itself, on a filesystem every node shares",
                         hint="drop --ray-sink (it serves get features/result/head)")
    total, done = len(units), 0
    todo: list[tuple[dict[str, Any], ResultRequest]] = []
    for unit in units:
        row = dict(unit.row)
        if unit.request is None:
            row["error"] = unit.error
        else:
            try:
                hit = stored_result(plan(unit.request, store))
            except VbstoreError as exc:
                hit, row["error"] = None, str(exc)
            if hit is None and "error" not in row:
                todo.append((unit.row, unit.request))
                continue
            if hit is not None:
                row.update(result_fields(unit.request.probe.task, hit))
        done += 1
        yield {**row, "done": done, "total": total}
    if not todo:
        return
    import ray  # heavy: only when some unit has to be computed

    owned = executor.connect()
    task = ray.remote(run_unit).options(max_retries=3, **executor.unit_resources())
    root, here = str(store.root), machine()
    # (row, request, wait), popped from the end: grid order
    queue = [(row, request, False) for row, request in reversed(todo)]
    running: dict[Any, tuple[dict[str, Any], ResultRequest]] = {}
    try:
        while queue or running:
            while queue and len(running) < (executor.workers or len(todo)):
                row, request, wait = queue.pop()
                running[task.remote(root, request, wait, here, batch_size)] = (row, request)
            ready, _ = ray.wait(list(running), num_returns=1)
            row, request = running.pop(ready[0])
            try:
                out = ray.get(ready[0])
            except ray.exceptions.RayError as exc:
                raise ExecutorError(f"{row['label']} x {row['task']} failed on Ray: "
                                    f"{str(exc).splitlines()[0]}",
                                    hint="run the sweep again: finished units are kept") from None
            if out.get("busy"):  # another driver computes it: wait for its answer, last
                queue.insert(0, (row, request, True))
                continue
            done += 1
            yield {**row, **out, "done": done, "total": total}
    except BaseException:
        for ref in running:
            ray.cancel(ref, force=True)
        if owned:  # the job ends with the connection: Ray stops whatever it still runs
            ray.shutdown()
        raise
