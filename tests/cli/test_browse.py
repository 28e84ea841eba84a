"""``vbstore browse``: the snapshot's tables are the store's records, and a real headless
browser renders the results page Datasette serves on 127.0.0.1."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner

from vbstore import Store
from vbstore.browse import build_snapshot, serve, wait_until_up
from vbstore.cli import cli

TINY = ["--weights", "random", "--input-size", "32"]
# Debian's package (apt-get install chromium-headless-shell), or a full chromium
BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")


@pytest.fixture(scope="module")
def populated(tmp_path_factory):
    """A store with a knn result and a tagged classification head on tiny shapes."""
    from vbstore.data import make_shapes

    root = tmp_path_factory.mktemp("browse")
    shapes = str(make_shapes(root / "shapes", per_class=3, seed=4, size=32))
    runner = CliRunner()
    store = str(root / "s")
    out = runner.invoke(cli, ["--store", store, "get", "result", "-b", "test_cnn", *TINY, "-t",
                              "knn", "-d", shapes, "--split", "val", "--train-data", shapes,
                              "--train-split", "train", "--json"])
    assert out.exit_code == 0, out.output
    head = runner.invoke(cli, ["--store", store, "get", "head", "-b", "test_cnn", *TINY, "-t",
                               "classification", "--train-data", shapes, "--train-split",
                               "train", "--tag", "cnn-linear", "--json"])
    assert head.exit_code == 0, head.output
    return root / "s", json.loads(out.stdout), json.loads(head.stdout)


def test_snapshot_tables_are_the_records(populated, tmp_path):
    root, result, head = populated
    with Store(root) as store:
        path = build_snapshot(store, tmp_path / "b.db")
    db = sqlite3.connect(path)
    row = db.execute("SELECT task, backbone, headline_metric, headline, eval_manifest, split "
                     "FROM results WHERE id=?", (result["id"],)).fetchone()
    record = result["record"]
    assert row == ("knn", "test_cnn", "top1", record["metrics"]["top1"],
                   record["data"]["eval"]["manifest"], "val")
    names, task = db.execute("SELECT names, task FROM heads WHERE id=?", (head["id"],)).fetchone()
    assert (names, task) == ("cnn-linear", "classification")
    inputs = dict(db.execute("SELECT role, input FROM lineage WHERE artifact=?", (result["id"],)))
    assert record["data"]["eval"]["manifest"] in inputs.values()
    assert db.execute("SELECT id, kind FROM refs WHERE name='cnn-linear'").fetchone() == (
        head["id"], "head")


def test_cli_writes_the_snapshot(populated, tmp_path):
    root, result, _ = populated
    out = CliRunner().invoke(cli, ["--store", str(root), "browse", "--no-serve", "--snapshot",
                                   str(tmp_path / "x.db"), "--json"])
    assert out.exit_code == 0, out.output
    path = json.loads(out.stdout)["snapshot"]
    ids = [r[0] for r in sqlite3.connect(path).execute("SELECT id FROM results")]
    assert ids == [result["id"]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def browser() -> str:
    """The headless browser on PATH; without one the test skips, or fails under CI. Asked for
    before ``populated`` (same scope: argument order), so that a missing browser is found before
    the store is computed (test_under_ci_a_missing_browser_fails_rather_than_skips runs it)."""
    found = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if found is None:
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail("no headless Chromium under CI: `make test` installs "
                        "chromium-headless-shell (make browser); CI must test the page")
        pytest.skip("no headless Chromium: apt-get install chromium-headless-shell")
    return found


@pytest.mark.slow
def test_a_headless_browser_renders_a_result_row(browser, populated, tmp_path):
    root, result, _ = populated
    with Store(root) as store:
        path = build_snapshot(store, tmp_path / "vbstore.db")
    port = _free_port()
    url = f"http://127.0.0.1:{port}/vbstore/results"
    process = serve(path, port)
    try:
        wait_until_up(process, url)
        dom = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", url],
            capture_output=True, text=True, timeout=120, check=True,
            env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}).stdout
    finally:
        process.terminate()
        process.wait(10)
    assert "<table" in dom
    assert result["id"] in dom  # the result's row, with its id...
    assert "knn" in dom
    assert "test_cnn" in dom
    assert "Every stored result" in dom  # the table's description from the metadata


@pytest.mark.slow
def test_under_ci_a_missing_browser_fails_rather_than_skips(tmp_path):
    """CI (CI=true) must test the page: with no browser on PATH the browser test fails."""

    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python").symlink_to(sys.executable)
    env = {**os.environ, "CI": "true", "PATH": str(bare)}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         f"{__file__}::test_a_headless_browser_renders_a_result_row"],
        capture_output=True, text=True, env=env, timeout=600, check=False)
    assert out.returncode == 1, out.stdout[-2000:]
    assert "no headless Chromium under CI" in out.stdout
    assert "1 error" in out.stdout  # in the browser fixture, set up before the store


@pytest.mark.parametrize("target", ["registry.db", "objects/planted.db", "elsewhere.db"])
def test_a_snapshot_never_overwrites_the_registry_or_another_database(populated, tmp_path,
                                                                      target):
    """Issue 32: ``browse --snapshot <store>/registry.db`` replaced the registry (exit 0)."""
    root, result, _ = populated
    path = (root / target) if target != "elsewhere.db" else tmp_path / target
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE mine (x)")
        db.close()
    before = path.read_bytes()
    out = CliRunner().invoke(cli, ["--store", str(root), "browse", "--no-serve", "--snapshot",
                                   str(path)])
    assert out.exit_code == 2, out.output
    assert len(out.output.strip().splitlines()) == 1
    assert "--snapshot" in out.output
    assert path.read_bytes() == before
    with Store(root) as store:
        assert store.has(result["id"])


def test_a_snapshot_is_rewritten_in_place_and_by_default_in_the_store(populated, tmp_path):
    root, _, _ = populated
    for args in (["--snapshot", str(tmp_path / "x.db")], ["--snapshot", str(tmp_path / "x.db")],
                 []):
        out = CliRunner().invoke(cli, ["--store", str(root), "browse", "--no-serve", *args])
        assert out.exit_code == 0, out.output


def _answers(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.skipif(importlib.util.find_spec("datasette") is None, reason="browse extra")
def test_sigterm_to_browse_stops_datasette(populated, tmp_path):
    """Issue 32: SIGTERM to ``vbstore browse`` left Datasette listening."""
    import signal
    import time

    root, _, _ = populated
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "vbstore", "--store", str(root), "browse", "--port", str(port),
         "--snapshot", str(tmp_path / "t.db")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode()  # printed once the server answers
        assert "serving" in line, process.stderr.read().decode() if process.stderr else line
        assert _answers(port)
        process.send_signal(signal.SIGTERM)
        assert process.wait(20) == 0
        deadline = time.monotonic() + 10
        while _answers(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _answers(port), "datasette still listening after browse was terminated"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_snapshot_says_it_is_one_so_a_later_table_change_can_rewrite_it(populated, tmp_path):
    root, _, _ = populated
    path = tmp_path / "old.db"
    with Store(root) as store:
        build_snapshot(store, path)
    with sqlite3.connect(path) as db:  # as if written by a version with another table set
        db.execute("DROP TABLE lineage")
    db.close()
    with Store(root) as store:
        assert build_snapshot(store, path) == path


@pytest.mark.skipif(importlib.util.find_spec("datasette") is None or sys.platform != "linux",
                    reason="browse extra; PR_SET_PDEATHSIG is Linux's")
def test_a_killed_browse_takes_datasette_with_it(populated, tmp_path):
    """SIGKILL cannot be caught: the kernel stops the server when its parent dies."""
    import signal
    import time

    root, _, _ = populated
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "vbstore", "--store", str(root), "browse", "--port", str(port),
         "--snapshot", str(tmp_path / "k.db")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
    try:
        assert process.stdout is not None
        assert "serving" in process.stdout.readline().decode()
        process.send_signal(signal.SIGKILL)
        process.wait(20)
        deadline = time.monotonic() + 10
        while _answers(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _answers(port), "datasette still listening after browse was killed"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
