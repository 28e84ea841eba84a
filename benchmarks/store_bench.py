"""Store throughput, side by side with raw file I/O in one run (ratios, then absolute figures).

    python benchmarks/store_bench.py [--quick] [--dir DIR]

Measures: put vs a raw write+fsync of the same bytes; read vs a raw read; BLAKE3 rate vs raw
read rate; fsck rate; gc time for 100k objects; warm vs cold hashing of a 10k-file folder.
Machines here are shared and noisy: trust the ratios more than the absolute times.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import blake3

from vbstore.store import fsck, gc, reachable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from vbstore import Store
from vbstore.store import db_id
from vbstore.store._objects import hash_file


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def best_of(n: int, fn) -> float:
    return min(timed(fn) for _ in range(n))


def raw_write(dir_: Path, blobs: list[bytes]) -> None:
    for i, data in enumerate(blobs):
        with open(dir_ / f"raw{i}", "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())


def bench_put_read(work: Path, count: int, size: int) -> dict:
    blobs = [os.urandom(size) for _ in range(count)]
    total = count * size / 1e6
    raw_dir = work / "raw"
    raw_dir.mkdir()
    put_times, raw_times = [], []
    for trial in range(3):  # interleave so drift hits both sides alike
        shutil.rmtree(work / "s", ignore_errors=True)
        for f in raw_dir.iterdir():
            f.unlink()
        raw_times.append(timed(lambda: raw_write(raw_dir, blobs)))
        store = Store(work / "s")
        _ = store.db  # open the registry before the clock starts
        put_times.append(timed(lambda s=store: [s.put_bytes(b) for b in blobs]))
        if trial < 2:
            store.close()
    ids = [store.put_bytes(b) for b in blobs]
    raw_paths = sorted(raw_dir.iterdir())
    raw_read = best_of(3, lambda: [p.read_bytes() for p in raw_paths])
    store_read = best_of(3, lambda: [store.read_bytes(i) for i in ids])
    hash_mem = best_of(3, lambda: [blake3.blake3(b).hexdigest() for b in blobs])
    hash_files = best_of(3, lambda: [hash_file(store.files.path(i)) for i in ids])
    report = fsck(store)
    fsck_time = best_of(3, lambda: fsck(store))
    store.close()
    return {
        "put_MBps": total / min(put_times), "raw_write_MBps": total / min(raw_times),
        "read_MBps": total / store_read, "raw_read_MBps": total / raw_read,
        "blake3_mem_MBps": total / hash_mem, "blake3_file_MBps": total / hash_files,
        "fsck_MBps": report.bytes / 1e6 / fsck_time,
        "fsck_objects_per_s": report.checked / fsck_time,
    }


def bench_gc(work: Path, n: int) -> dict:
    """A store with n objects, half reachable from results; time gc (mark and sweep)."""
    store = Store(work / "gc")
    now = time.time() - 7200
    rows, edges = [], []
    for i in range(n):
        data = f"object {i}".encode()
        oid = blake3.blake3(data).hexdigest()
        path = store.files.path(oid)
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
        kind = "result" if i % 100 == 0 and i < n // 2 else "blob"
        rows.append((db_id(oid), kind, len(data), now, now))
        if i < n // 2 and i % 100:
            edges.append((rows[i - i % 100][0], db_id(oid), f"in{i % 100}"))
    # bulk-loaded directly: 100k individual fsynced puts would dominate the run and say nothing
    # about gc
    with store.db.write() as conn:
        conn.executemany(
            "INSERT INTO objects(id, kind, size, created, last_used) VALUES (?,?,?,?,?)", rows)
        conn.executemany("INSERT INTO edges(parent, child, role) VALUES (?,?,?)", edges)
    mark = timed(lambda: reachable(store))
    start = time.perf_counter()
    report = gc(store)
    gc_time = time.perf_counter() - start
    store.close()
    return {"objects": n, "removed": len(report.removed), "gc_s": gc_time, "mark_s": mark}


def bench_folder(work: Path, n: int, size: int) -> dict:
    folder = work / "folder"
    folder.mkdir(parents=True)
    paths = []
    for i in range(n):
        path = folder / f"{i:05d}.jpg"
        path.write_bytes(os.urandom(size))
        paths.append(path)
    past = time.time() - 60
    for path in paths:
        os.utime(path, (past, past))
    store = Store(work / "store")
    _ = store.db  # open the registry before the clock starts
    cold = timed(lambda: store.file_states.hash(paths))
    warm = best_of(3, lambda: store.file_states.hash(paths))
    store.close()
    return {"files": n, "cold_s": cold, "warm_s": warm}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--dir", default=None, help="work directory (default: a temp dir)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vbstore-bench-", dir=args.dir))
    try:
        q = args.quick
        io = bench_put_read(work, 8 if q else 32, (4 if q else 8) << 20)
        gc = bench_gc(work, 10_000 if q else 100_000)
        # folder hashing depends on file size: thumbnails, and ImageNet-sized JPEGs (~110 KB)
        fs_small = bench_folder(work / "small", 1000 if q else 10_000, 16_384)
        fs = bench_folder(work / "large", 1000 if q else 10_000, 112_640)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("ratios (measured side by side in this run)")
    print(f"  put / raw write (fsync)   {io['put_MBps'] / io['raw_write_MBps']:.2f}x   "
          "target >= 0.8")
    print(f"  read / raw read           {io['read_MBps'] / io['raw_read_MBps']:.2f}x   "
          "target >= 0.9")
    print(f"  BLAKE3 / raw read         {io['blake3_file_MBps'] / io['raw_read_MBps']:.2f}x")
    print(f"  warm / cold folder hash   {fs['cold_s'] / fs['warm_s']:.1f}x faster with 110 KB files"
          ", "
          f"{fs_small['cold_s'] / fs_small['warm_s']:.1f}x with 16 KB files   target >= 20")
    print("absolute")
    print(f"  put {io['put_MBps']:.0f} MB/s, raw write {io['raw_write_MBps']:.0f} MB/s")
    print(f"  read {io['read_MBps']:.0f} MB/s, raw read {io['raw_read_MBps']:.0f} MB/s")
    print(f"  BLAKE3 in memory {io['blake3_mem_MBps']:.0f} MB/s, "
          f"from file (mmap) {io['blake3_file_MBps']:.0f} MB/s")
    print(f"  fsck {io['fsck_MBps']:.0f} MB/s ({io['fsck_objects_per_s']:.0f} objects/s)")
    print(f"  gc of {gc['objects']} objects: {gc['gc_s']:.2f} s (mark {gc['mark_s']:.2f} s, "
          f"removed {gc['removed']})")
    for label, row in (("110 KB", fs), ("16 KB", fs_small)):
        print(f"  {row['files']}-file folder of {label} files: cold {row['cold_s']:.3f} s, "
              f"warm {row['warm_s']:.4f} s ({row['warm_s'] / row['files'] * 1e6:.1f} us per file)")


if __name__ == "__main__":
    main()
