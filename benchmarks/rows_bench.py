"""Retrieval on N stored-like rows: this checkout's numpy scorer beside another checkout's.

    python benchmarks/rows_bench.py [--rows 10000] [--dim 320] [--code base=DIR]

Rows: 50 class means plus 4x their spread of noise, float32 (a hard retrieval: mAP ~0.09 at
10k rows), one thread. Each side runs ``get_task("retrieval").evaluate_zero_shot`` in a fresh
process on the same rows (torch tensors for a checkout whose retrieval computes with torch,
numpy arrays otherwise). Printed per side: wall and CPU seconds, peak RSS, the metrics.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SIDE = """
import json, resource, sys, time
import numpy as np
n, c = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
y = rng.integers(0, 50, n)
x = (rng.normal(size=(50, c))[y] + 4 * rng.normal(size=(n, c))).astype(np.float32)
import vbstore
from vbstore.tasks import get_task
task = get_task("retrieval")
if getattr(task, "array", "torch") == "torch":
    import torch
    x, y = torch.from_numpy(x), torch.from_numpy(y)
begin, begin_cpu = time.perf_counter(), time.process_time()
metrics = task.evaluate_zero_shot(x, y, {}, {})
print(json.dumps({"wall": time.perf_counter() - begin, "cpu": time.process_time() - begin_cpu,
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "metrics": metrics, "vbstore": vbstore.__file__}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--dim", type=int, default=320)
    parser.add_argument("--code", action="append", default=[], metavar="LABEL=DIR",
                        type=lambda text: tuple(text.split("=", 1)))
    args = parser.parse_args()
    env = {**os.environ, **dict.fromkeys(("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                          "OPENBLAS_NUM_THREADS"), "1")}
    for label, code in [("vbstore", str(Path(__file__).resolve().parents[1])), *args.code]:
        # in the temporary folder: ``python -c`` puts the working directory first on sys.path
        proc = subprocess.run([sys.executable, "-c", SIDE, str(args.rows), str(args.dim)],
                              capture_output=True, text=True, check=True,
                              env={**env, "PYTHONPATH": code}, cwd=tempfile.gettempdir())
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        if not Path(out["vbstore"]).is_relative_to(Path(code).resolve()):
            raise SystemExit(f"rows_bench: side {label} imports {out['vbstore']}, not {code}")
        print(f"{label:<8} {args.rows} x {args.dim}: {out['wall']:.2f} s wall, {out['cpu']:.2f} s "
              f"CPU, peak RSS {out['rss_mib']:.0f} MiB, {out['metrics']}")


if __name__ == "__main__":
    main()
