"""Where a new head's seconds go: ``import torch``, the training, and everything else.

    PYTHONPATH=CHECKOUT python benchmarks/head_floor.py [--with-torch] VBSTORE_ARGS...

e.g. ``-q --store STORE get result -b efficientnet_lite0 -d DATA --split val -t classification
--train-data DATA --train-split train -p epochs=104 --json`` on a store that holds both splits'
features (give each run other epochs, so that each trains a head). With ``--with-torch`` torch
is imported first and timed (what every new head paid before the linear probes trained in
numpy, and what a checkout before that still pays); without, the command imports what it
needs. The command runs in this process with ``vbstore.tasks._linear.train`` (the linear
head's training) timed; printed on stderr: wall and CPU seconds of each part, and whether the
command loaded torch. The command's own output goes to stdout, as the CLI prints it.
"""

from __future__ import annotations

import sys
import time
from typing import Any


def main() -> None:
    args = sys.argv[1:]
    with_torch = "--with-torch" in args[:1]
    begin, begin_cpu = time.perf_counter(), time.process_time()
    if with_torch:
        import torch  # noqa: F401  (timed: what a step that trains a head in torch pays first)

        args = args[1:]
    torch_s, torch_cpu = time.perf_counter() - begin, time.process_time() - begin_cpu
    import vbstore.cli
    from vbstore.tasks import _linear

    train = {"s": 0.0, "cpu": 0.0}
    real = _linear.train

    def timed(*args: Any, **kwargs: Any) -> Any:
        start, start_cpu = time.perf_counter(), time.process_time()
        try:
            return real(*args, **kwargs)
        finally:
            train["s"] += time.perf_counter() - start
            train["cpu"] += time.process_time() - start_cpu

    _linear.train = timed
    try:
        vbstore.cli.cli(args, standalone_mode=False)
    except SystemExit:
        pass
    total, total_cpu = time.perf_counter() - begin, time.process_time() - begin_cpu
    print(f"wall {total:.2f} s: import torch {torch_s:.2f}, train {train['s']:.2f}, rest "
          f"{total - torch_s - train['s']:.2f}; cpu {total_cpu:.2f} s: import torch "
          f"{torch_cpu:.2f}, train {train['cpu']:.2f}, rest "
          f"{total_cpu - torch_cpu - train['cpu']:.2f}; torch loaded: {'torch' in sys.modules}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
