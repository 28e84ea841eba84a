"""CLIP_benchmark 1.6.2 as a yardstick: installed once per test run (tests/conftest.py's
``peers_site``, which the conformance tier shares), never imported by vbstore.

``VBSTORE_PEERS_SITE`` may name the folders (``os.pathsep``-separated) that already hold it;
otherwise pip installs it and VisBench 0.27.0, without their dependencies (torch, open_clip,
sklearn, pycocotools and pycocoevalcap, which its command line imports, come with the test
extras), into a temp folder.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def clip_benchmark_site(request) -> list[Path]:
    """Folders that hold ``clip_benchmark`` 1.6.2 (pycocoevalcap comes with the test extras)."""
    given = os.environ.get("VBSTORE_PEERS_SITE")
    if given:
        return [Path(p) for p in given.split(os.pathsep) if p]
    return [request.getfixturevalue("peers_site")]


# The peer process's loop: one JSON request a line ({"code", "argv"}), each run as
# ``python -c CODE ARGV...`` runs it (fresh globals, that sys.argv, its stdout captured), one JSON
# reply a line: the stdout, and the traceback where it raised (a zero exit is no error)
_PEER_LOOP = """
import contextlib, io, json, sys, traceback
for line in sys.stdin:
    request, out, error = json.loads(line), io.StringIO(), None
    sys.argv = ["-c", *request["argv"]]
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__"})
    except SystemExit as exc:
        if exc.code not in (None, 0):
            error = f"SystemExit({exc.code!r})"
    except BaseException:
        error = traceback.format_exc()
    sys.__stdout__.write(json.dumps({"stdout": out.getvalue(), "error": error}) + "\\n")
    sys.__stdout__.flush()
"""


@pytest.fixture(scope="session")
def clip_benchmark_peer(clip_benchmark_site, tmp_path_factory):
    """``peer(code, *argv)``: what ``python -c CODE ARGV...`` prints, run by CLIP_benchmark in
    its own process, ``clip_benchmark_site`` on its ``PYTHONPATH`` (the questions never import
    vbstore). One such process serves the test run (each xdist worker's own), so CLIP_benchmark's
    imports (torch, torchvision, open_clip) are paid once, not once per question; each question
    gets fresh globals. A question that raises (or exits non-zero) fails the test with the
    peer's traceback."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, clip_benchmark_site))}
    log = tmp_path_factory.mktemp("clip_benchmark_peer") / "stderr.txt"
    with log.open("w") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", _PEER_LOOP], env=env, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)

    def ask(code: str, *argv: str) -> str:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write(json.dumps({"code": code, "argv": list(argv)}) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        assert line, f"the CLIP_benchmark process ended: {log.read_text()[-3000:]}"
        reply = json.loads(line)
        assert reply["error"] is None, reply["error"]
        return reply["stdout"]

    yield ask
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def clip_benchmark(clip_benchmark_site, monkeypatch):
    """The ``clip_benchmark`` package, importable for this test only."""
    for site in reversed(clip_benchmark_site):
        monkeypatch.syspath_prepend(str(site))
    for name in [m for m in sys.modules if m.split(".")[0] == "clip_benchmark"]:
        monkeypatch.delitem(sys.modules, name)
    module = importlib.import_module("clip_benchmark")
    assert module.__file__ is not None
    assert any(Path(module.__file__).is_relative_to(site) for site in clip_benchmark_site)
    return module


@pytest.fixture(scope="module")
def shapes(shapes_folder):
    """A small shapes dataset (train and val splits) as image folders."""
    return shapes_folder(4, 1)
