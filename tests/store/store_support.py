"""A minimal valid suite document: the store tests' stand-in for any small JSON artifact."""

PROTOCOL = {"task": "knn", "data": {"kind": "external"},
            "conditions": [{"name": "val", "sampleCount": 1}],
            "metrics": [{"key": "top1", "headline": True}]}


def suite_doc(name: str, version: int = 1) -> dict:
    return {"slug": "s", "name": name, "version": version, "protocol": PROTOCOL}


def run_read_only(root, code: str, *args: str):
    """Run ``python -c code *args`` with the store folder ``root`` read-only; return its JSON.

    As a normal user the folder is made read-only with chmod; as root (which chmod does not
    stop) it is bind-mounted read-only in a private mount namespace, as a team's shared cache on
    a read-only mount would be.
    """
    import json
    import os
    import shutil
    import stat
    import subprocess
    import sys
    from pathlib import Path

    import pytest

    root = Path(root)
    command = [sys.executable, "-c", code, *args]
    if os.geteuid() == 0:
        if shutil.which("unshare") is None or subprocess.run(
                ["unshare", "-m", "true"], capture_output=True, check=False).returncode != 0:
            pytest.skip("root without `unshare -m`: no way to make a folder read-only for root")
        mount = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'
        command = ["unshare", "-m", "sh", "-c", mount, "sh", str(root), *command]
    modes = {}
    if os.geteuid() != 0:
        for path in [root, *root.rglob("*")]:
            modes[path] = path.lstat().st_mode
            path.chmod(stat.S_IMODE(modes[path]) & ~0o222)
    try:
        proc = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    finally:
        for path, mode in modes.items():
            path.chmod(stat.S_IMODE(mode))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_on_small_disk(size: str, code: str, *args: str):
    """Run ``python -c code MOUNT *args`` with a fresh tmpfs of ``size`` at MOUNT; return its JSON.

    A real full disk, in a private mount namespace (as root, or as a user through a user
    namespace); skipped, saying why, where neither can mount.
    """
    import json
    import os
    import subprocess
    import sys
    import tempfile

    import pytest

    namespace = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-Urm"]
    with tempfile.TemporaryDirectory() as mount:
        script = f'mount -t tmpfs -o size={size} tmpfs "$1" && shift && exec "$@"'
        command = [*namespace, "sh", "-c", script, "sh", mount, sys.executable, "-c", code,
                   mount, *args]
        probe = subprocess.run([*namespace, "sh", "-c", f"mount -t tmpfs tmpfs {mount}"],
                               capture_output=True, check=False)
        if probe.returncode != 0:
            pytest.skip(f"cannot mount a small tmpfs here ({probe.stderr.decode().strip()})")
        proc = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])
