"""The answer cache through the command line: a repeated `get result` is printed again without
click or the engine, and anything its answer depended on that changes makes it miss, so the
full command answers instead (the cache's own checks: tests/store/test_answers.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from vbstore.cli import _answers
from vbstore.engine import _answers as engine_answers
from vbstore.store import _answers as cache

# each case runs the console script in fresh processes (~3-7 s apiece): the slow tier, which
# `make test` and CI run; the store's own invalidation tests (tests/store/test_store_answers.py)
# stay in the fast one
pytestmark = pytest.mark.slow

# main() as the console script runs it; stderr's last line says which path answered
CODE = ("import sys, vbstore.cli\n"
        "try:\n    vbstore.cli.main(sys.argv[1:])\n"
        "finally:\n    sys.stderr.write('\\nANSWERED-BY ' + ('full' if 'click' in sys.modules "
        "else 'cache') + '\\n')\n")
SECONDS = re.compile(r"in \d+\.\d\d s")


def args_for(store_dir, data, *extra):
    return ["--store", str(store_dir), "get", "result", "-b", "test_cnn", "-t", "knn",
            "-d", str(data), "--split", "val", "--train-data", str(data), "--train-split",
            "train", "--weights", "random", "--input-size", "32", *extra]


# the template store (`made`) holds these questions' results, each computed once for the module,
# in this process; a test that needs no computation starts from copies (`stored`, `data`), so
# its first command is the full command answering from the store
LIMITED = ("--limit", "1", "--train-limit", "1")
HEAD = ("get", "head", "-b", "test_cnn", "-t", "classification", "--train-split", "train",
        "--weights", "random", "--input-size", "32", "--tag", "h")


def with_head(store_dir, data):
    """``get result`` with the head tagged ``h``: a command line whose answer is not recorded."""
    return ["--store", str(store_dir), "get", "result", "-b", "test_cnn", "-t", "classification",
            "-d", str(data), "--split", "val", "--weights", "random", "--input-size", "32",
            "--head", "h"]


def write_checkpoint(path, seed):
    """test_cnn's random weights of ``seed``, saved as a checkpoint at ``path``."""
    from safetensors.torch import save_file

    from vbstore.backbones import build_backbone

    model = build_backbone("test_cnn", weights="random", seed=seed, input_size=32).module
    save_file({k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
              str(path))


def on_checkpoint(args, path):
    return [a if a != "random" else str(path) for a in args]


def sample(data):
    """The val image a test changes or copies."""
    return min((data / "val").rglob("*.png"))


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(data folders, store folder, knn result id): ``shapes`` (4 images per class and split)
    and ``other`` (5: other images under the same names), and a store holding ``args_for``'s
    knn result on each, on ``shapes`` with one val image copied in, on ``shapes`` with
    ``LIMITED``, and on checkpoints of seed 0's and seed 1's weights; the head ``h`` trained on
    ``shapes`` and its result. Computed in this process, through the CLI (no answer recorded),
    once for the module; read only: tests use copies."""
    from click.testing import CliRunner

    from vbstore.cli import cli
    from vbstore.data import make_shapes

    root = tmp_path_factory.mktemp("answers")
    folders = {"shapes": make_shapes(root / "shapes", per_class=4, seed=5, size=32),
               "other": make_shapes(root / "other", per_class=5, seed=5, size=32)}
    grown = shutil.copytree(folders["shapes"], root / "grown")
    shutil.copy(sample(grown), sample(grown).with_name("copy.png"))
    checkpoints = [root / f"tuned{seed}.safetensors" for seed in (0, 1)]
    for seed, path in enumerate(checkpoints):
        write_checkpoint(path, seed)
    store_dir, runner = root / "store", CliRunner()
    shapes = folders["shapes"]
    for args in (args_for(store_dir, shapes, "--json"), args_for(store_dir, folders["other"]),
                 args_for(store_dir, grown), args_for(store_dir, shapes, *LIMITED),
                 *(on_checkpoint(args_for(store_dir, shapes), path) for path in checkpoints),
                 ["--store", str(store_dir), *HEAD, "--train-data", str(shapes)],
                 with_head(store_dir, shapes)):
        out = runner.invoke(cli, args)
        assert out.exit_code == 0, out.output
        if "--json" in args:
            knn = json.loads(out.stdout)["id"]
    assert answers(store_dir) == []
    return folders, store_dir, knn


@pytest.fixture
def data(made, tmp_path):
    """A copy of the template's ``shapes`` folder, this test's own."""
    return Path(shutil.copytree(made[0]["shapes"], tmp_path / "shapes"))


@pytest.fixture
def store_dir(tmp_path):
    """An empty store folder: the test's first command computes."""
    return tmp_path / "store"


@pytest.fixture
def stored(made, tmp_path):
    """A copy of the template store: ``data``'s results are there, its answers not yet."""
    return Path(shutil.copytree(made[1], tmp_path / "stored"))


def run(args, cwd=None, env=None):
    """(stdout, stderr without the marker, which path answered)."""
    proc = subprocess.run([sys.executable, "-c", CODE, *args], capture_output=True, text=True,
                          cwd=cwd, env=None if env is None else {**os.environ, **env})
    err, _, by = proc.stderr.rstrip("\n").rpartition("\nANSWERED-BY ")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, err, by


def settled():
    time.sleep(2 * cache.RACY_NS / 1e9)  # past the racy window, so the next run records


def registry(store_dir):
    """The store's registry, closed on leaving (a connection left open keeps the registry's WAL
    files, which a copy of the store would then race with)."""
    return closing(sqlite3.connect(store_dir / "registry.db", isolation_level=None))


def answers(store_dir):
    with registry(store_dir) as conn:
        return [json.loads(d) for (d,) in conn.execute("SELECT deps FROM answers")]


def forget(store_dir):
    """Empty the answer cache, so that the next command answers the full way (and records)."""
    with registry(store_dir) as conn:
        conn.execute("DELETE FROM answers")


def test_a_repeated_answer_comes_from_the_cache_and_prints_the_same(store_dir, data):
    """The first repeat after a computation is answered from the cache, as the full command
    prints it. The answer recorded after a computation leaves out the libraries only computing
    loaded (torch...): what the same question answered from the store loads must all be among
    its modules (``_answers.answer_modules``)."""
    args = args_for(store_dir, data)
    settled()
    computed, _, by = run(args)
    assert (by, "computed" in computed) == ("full", True)
    (after_computing,) = answers(store_dir)
    assert not any(f"{os.sep}torch{os.sep}" in m for m in after_computing["modules"])
    out, err, by = run(args)  # the first repeat: recorded by the computation
    assert by == "cache"
    assert "cached in the store" in out
    forget(store_dir)
    full_out, full_err, by = run(args)  # the full command's answer from the store
    assert by == "full"
    (from_the_store,) = answers(store_dir)  # recorded with all it loaded
    assert set(from_the_store["modules"]) <= set(after_computing["modules"])
    assert SECONDS.sub("", out) == SECONDS.sub("", full_out)
    assert err == full_err
    # what answering loaded: the cache and its printer, nothing of click, the engine or typing
    listed = ("print(sorted(m for m in sys.modules if m.startswith("
              "('vbstore', 'click', 'typing', 'torch', 'numpy'))))\n    ")
    code = CODE.replace("sys.stderr.write(", listed + "sys.stderr.write(")
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    assert proc.stdout.splitlines()[-1] == str(
        ["vbstore", "vbstore.cli", "vbstore.cli._answers", "vbstore.cli._resulttext",
         "vbstore.store", "vbstore.store._answers", "vbstore.store._layout"])
    # --json is the same question printed as JSON: answered from the same record
    out, _, by = run([*args, "--json"])
    assert by == "cache"
    cached = json.loads(out)
    forget(store_dir)
    full_json, _, by = run([*args, "--json"])
    assert by == "full"
    full_json = json.loads(full_json)
    assert cached.pop("seconds") >= 0
    assert full_json.pop("seconds") >= 0
    assert cached == full_json


def test_every_spelling_of_the_question_is_answered_from_the_cache(stored, data):
    store_dir = stored
    words = args_for(store_dir, data)[2:]  # from `get` on
    settled()
    first, _, by = run(["--quiet", "--store", str(store_dir), *words])
    assert by == "full"  # answered from the store, and recorded
    assert "cached in the store" in first
    text = None
    for spelling, cwd, env in (
            (["--store", str(store_dir)], None, None),
            (["-q", f"--store={store_dir}"], None, None),
            ([f"--store={store_dir}", "--quiet"], None, None),
            (["--store", os.path.relpath(store_dir)], None, None),
            ([], None, {"VBSTORE_HOME": str(store_dir)}),
            (["-q"], None, {"VBSTORE_HOME": str(store_dir)})):
        out, _, by = run([*spelling, *words], cwd=cwd, env=env)
        assert by == "cache", spelling
        text = text or out
        assert same_answer(out, text)
    out, _, by = run(["--store", str(store_dir), *words[:2], "--json", *words[2:], "-q"])
    assert by == "cache"
    assert json.loads(out)["record"]["task"] == "knn"
    assert len(answers(store_dir)) == 1  # one question, one record
    # a root option the cache does not know, and a --json that may be an option's value (a
    # split named --json): the full command answers
    assert run(["--store", str(store_dir), "--version"])[2] == "full"
    assert _answers.command_words(["--store", "s", "-v", "get", "result"]) is None
    _, words_kept, flag = _answers.command_words(["get", "result", "--split", "--json"])
    assert (words_kept, flag) == (["get", "result", "--split", "--json"], False)
    _, words_kept, flag = _answers.command_words(["get", "result", "--json", "-b", "x", "--json"])
    assert (words_kept, flag) == (["get", "result", "-b", "x"], True)


def recorded(args, cwd=None):
    """The full command's answer from the store, which records it: the cache answers the next
    run. The data must be in the store (a template copy, or computed first)."""
    settled()  # the data older than the racy window: the answer is recorded
    out, _, by = run(args, cwd)
    assert (by, "computed" in out) == ("full", False), out
    assert run(args, cwd)[2] == "cache"
    return out


def same_answer(a, b):
    return SECONDS.sub("", a) == SECONDS.sub("", b)


def test_any_change_under_the_data_folder_misses(stored, data):
    args = args_for(stored, data)
    before = recorded(args)
    image = sample(data)
    changes = [
        ("a file touched", lambda: os.utime(image)),
        ("a hidden file added", lambda: (data / "train" / ".notes").write_text("x")),
        ("an empty folder added at the top", lambda: (data / "extra").mkdir()),
        ("a file rewritten in place", lambda: image.write_bytes(image.read_bytes())),
    ]
    for what, change in changes:
        change()
        settled()
        out, _, by = run(args)
        assert by == "full", what
        assert same_answer(out, before), what  # none of these changes the samples
        assert run(args)[2] == "cache", what  # recorded again
    # a new sample changes the answer (the template store holds it too): the full command
    shutil.copy(image, image.with_name("copy.png"))
    out, _, by = run(args)
    assert by == "full"
    assert not same_answer(out, before)
    image.with_name("copy.png").unlink()
    settled()
    out, _, by = run(args)
    assert by == "full"
    assert same_answer(out, before)


def test_a_damaged_result_is_not_printed(stored, data):
    args = args_for(stored, data)
    before = recorded(args)
    oid = json.loads(run([*args, "--json"])[0])["id"]
    blob = stored / "objects" / oid[:2] / oid[2:]
    blob.chmod(0o644)
    blob.write_bytes(blob.read_bytes().replace(b'"top1":', b'"top1": ', 1))
    out, _, by = run(args)
    assert by == "full"  # moved aside and computed again, to the same numbers
    assert "computed" in out
    assert [line for line in out.splitlines() if "top" in line] == [
        line for line in before.splitlines() if "top" in line]


def test_registry_rows_are_read_again(stored, data):
    args = args_for(stored, data)
    before = recorded(args)
    with registry(stored) as conn:  # manifests no longer aliased
        conn.execute("DELETE FROM aliases")
    out, _, by = run(args)
    assert by == "full"
    assert same_answer(out, before)


def test_a_changed_module_file_misses(stored, data, tmp_path):
    args = args_for(stored, data)
    recorded(args)
    (deps,) = answers(stored)
    modules = deps["modules"]
    assert any(m.endswith(os.path.join("vbstore", "engine", "_plan.py")) for m in modules)
    assert any(m.endswith(os.path.join("click", "core.py")) for m in modules)
    # stand a file of ours in for one of them, as it was when recorded
    module = tmp_path / "module.py"
    module.write_text("x = 1\n")
    os.utime(module, ns=(0, 0))
    modules[modules.index(next(m for m in modules if m.endswith("_plan.py")))] = str(module)
    deps["modules_digest"] = cache.states("", modules)[0]
    with registry(stored) as conn:
        conn.execute("UPDATE answers SET deps = ?", (json.dumps(deps),))
    assert run(args)[2] == "cache"
    module.write_text("x = 2\n")
    os.utime(module, ns=(0, 0))  # the same mtime: the size and ctime still tell
    assert run(args)[2] == "full"


def test_the_same_words_in_another_folder_are_another_command(made, stored, tmp_path):
    here, other = tmp_path / "here", tmp_path / "elsewhere"
    shutil.copytree(made[0]["shapes"], here / "mine")
    shutil.copytree(made[0]["other"], other / "mine")  # other images, same names
    args = args_for(stored, "mine")  # relative: the folder is the working directory's
    before = recorded(args, cwd=here)
    out, _, by = run(args, cwd=other)
    assert by == "full"
    assert not same_answer(out, before)


def test_gc_empties_the_cache(stored, data):
    args = args_for(stored, data)
    recorded(args)
    assert answers(stored)
    gc = subprocess.run([sys.executable, "-m", "vbstore", "--store", str(stored), "gc"],
                        capture_output=True, text=True)
    assert gc.returncode == 0, gc.stderr
    assert answers(stored) == []
    assert run(args)[2] == "full"


def test_what_is_not_recorded(stored, data):
    # a head given by ref (the template's `h`): the ref can move
    args = with_head(stored, data)
    settled()
    assert [run(args)[2], run(args)[2]] == ["full", "full"]
    assert answers(stored) == []


def test_a_folder_much_larger_than_what_is_read(stored, data):
    args = args_for(stored, data, *LIMITED)
    spare = data / "spare"
    spare.mkdir()
    for i in range(cache.SPARE + 100):  # past the limit for the 10 samples read
        os.close(os.open(spare / f"{i}", os.O_CREAT | os.O_WRONLY))
    settled()
    assert [run(args)[2], run(args)[2]] == ["full", "full"]
    (deps,) = answers(stored)
    assert deps["skip"][0][0] == str(data)  # remembered until the folder's listing changes
    shutil.rmtree(spare)
    settled()
    assert [run(args)[2], run(args)[2]] == ["full", "cache"]


def test_the_lookup_names_the_store_of_the_command_line(monkeypatch):
    words = _answers.command_words
    monkeypatch.setenv("VBSTORE_HOME", "/home-store")
    assert words(["--store", "~/s", "get", "result", "-b", "x"]) == (
        os.path.expanduser("~/s"), ["get", "result", "-b", "x"], False)
    assert words(["--store=/s", "-q", "get", "result"])[0] == "/s"
    assert words(["--quiet", "get", "result"])[0] == "/home-store"
    assert words(["get", "features", "-d", "result"]) is None
    assert words(["-v", "get", "result"]) is None
    assert words(["--store=", "get", "result"]) is None
    assert words(["get", "result", "-b", "x", "--quiet", "-q"]) == (
        "/home-store", ["get", "result", "-b", "x"], False)
    assert words(["get", "result", "--", "-q"])[1] == ["get", "result", "--", "-q"]


def test_constants_follow_the_store():
    from vbstore.store import RACY_SECONDS, REGISTRY_VERSION
    from vbstore.store._registry import MIGRATIONS

    assert REGISTRY_VERSION == MIGRATIONS[-1][0]
    assert cache.RACY_NS == RACY_SECONDS * 1e9


def test_a_store_without_registry_is_left_alone(tmp_path):
    assert _answers.answer(["--store", str(tmp_path / "none"), "get", "result"]) is not True
    assert not (tmp_path / "none").exists()


# ---- the review's cases: what the full command reads beyond the data folder, and how the
# cache must fail (as the full command would, or by answering through it)


def fresh(args, cwd=None, env=None):
    """What the full command prints now, the answer cache left out (the click group itself)."""
    code = ("import sys\nfrom vbstore.cli._root import cli\n"
            "cli(args=sys.argv[1:], prog_name='vbstore')\n")
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_data_folder_reached_through_a_link_is_followed_again(made, stored, tmp_path):
    first = shutil.copytree(made[0]["shapes"], tmp_path / "first")
    second = shutil.copytree(made[0]["other"], tmp_path / "second")
    link = tmp_path / "current"
    link.symlink_to(first)
    args = args_for(stored, link)
    before = recorded(args)
    link.unlink()
    link.symlink_to(second)  # the same words now read other images (in the store too)
    out, _, by = run(args)
    assert by == "full"
    assert "cached in the store" in out
    assert numbers(out) != numbers(before)
    assert numbers(out) == numbers(fresh(args))  # the numbers it now stands by


def numbers(printed: str) -> list[str]:
    """A result's lines after its first, less what a computing run says it did per feature
    set (a cached answer computed nothing)."""
    return [line for line in printed.splitlines()[1:] if " features: " not in line]


def test_a_rewritten_checkpoint_misses(stored, data, tmp_path):
    checkpoint = tmp_path / "tuned.safetensors"
    write_checkpoint(checkpoint, 0)  # the template's weights: their result is stored
    args = on_checkpoint(args_for(stored, data), checkpoint)
    before = recorded(args)
    write_checkpoint(checkpoint, 1)  # other weights under the same path: another backbone
    out, _, by = run(args)
    assert by == "full"
    assert not same_answer(out, before)  # (the template store holds their result too)


def test_a_file_name_that_is_not_utf8_does_not_fail_the_command(stored, data):
    try:  # a stray hidden file named in Latin-1, which no layout reads
        (data / os.fsdecode(b".caf\xe9")).write_text("")
    except (OSError, UnicodeError):  # a filesystem that only takes UTF-8 names
        pytest.skip("this filesystem refuses names that are not UTF-8")
    args = args_for(stored, data)
    settled()
    out, _, by = run(args)  # answered from the store, then the recording must not fail it
    assert by == "full"
    assert "cached in the store" in out


def test_a_held_write_lock_does_not_hold_the_answer(stored, data):
    args = args_for(stored, data)
    run(args)  # the folder mapped to its manifests
    forget(stored)  # so the next run answers the full way, and records
    settled()
    conn = sqlite3.connect(stored / "registry.db", isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")  # another process writing, for longer than this runs
        proc = subprocess.run([sys.executable, "-c", CODE, *args], capture_output=True,
                              text=True, timeout=30)  # the registry's busy timeout is 60 s
    finally:
        conn.execute("ROLLBACK")
        conn.close()
    assert proc.returncode == 0, proc.stderr
    assert "cached in the store" in proc.stdout
    assert proc.stderr.endswith("ANSWERED-BY full\n")  # and tried to record it


def test_an_ascii_stdout_is_left_to_the_full_command(stored, data):
    args = args_for(stored, data)
    before = recorded(args)
    assert "–" in before  # noqa: RUF001 - the intervals' en dash, which ASCII cannot encode
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    proc = subprocess.run([sys.executable, "-c", CODE, *args], capture_output=True, env=env)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert proc.stderr.endswith(b"ANSWERED-BY full\n")  # click writes UTF-8 to it instead
    assert same_answer(proc.stdout.decode(), before)


def test_a_removed_working_directory_or_a_closed_stdout(stored, data, tmp_path):
    args = args_for(stored, data)
    recorded(args)
    gone = tmp_path / "gone"
    gone.mkdir()
    proc = subprocess.run(["sh", "-c", 'cd "$0" && rmdir "$0" && exec "$@"', str(gone),
                           sys.executable, "-c", CODE, *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "cached in the store" in proc.stdout
    proc = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-c", CODE,
                           *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr  # as the full command: nothing to print to


def test_a_replaced_listing_is_not_kept(stored, data):
    args = args_for(stored, data)
    recorded(args)
    (data / "extra").mkdir()  # another listing of the same folder
    settled()
    assert [run(args)[2], run(args)[2]] == ["full", "cache"]
    with registry(stored) as conn:
        names = [n for (n,) in conn.execute("SELECT names FROM answer_trees")]
    assert len(names) == 1
    assert "extra" in names[0].split("\0")


def test_the_states_the_listing_took_are_those_a_stat_gives(data, tmp_path):
    # recording takes each sample file's state from the listing that mapped the folder to its
    # manifest (one stat per file, not two); the digest must be the one statting every name gives
    from vbstore import Store
    from vbstore.data import load_manifest

    store = Store(tmp_path / "store")
    time.sleep(0.2)  # past the racy window, so the listing maps to a state key
    views = [load_manifest(store, data, split=s) for s in ("val", "train")]
    root = str(data)
    names = cache.walk(root, 10_000)
    known = engine_answers._listed(root, views)
    samples = sum(len(v) for v in views)
    # each split's files, by their name under the data folder
    assert len(known) == samples
    assert set(known) < set(names)
    assert all(n.startswith(("val/", "train/")) for n in known)
    assert cache.states(root + os.sep, names, known) == cache.states(root + os.sep, names)
    # a view of another folder lends nothing: its names would be another folder's files
    other = load_manifest(store, make_copy(data, tmp_path / "copy"), split="val")
    assert engine_answers._listed(root, [other]) == {}
    # a state the listing lent is used as it was read (a file changed since then misses at the
    # lookup); a lent name the walk does not list is not used
    digest = cache.states(root + os.sep, names)
    assert cache.states(root + os.sep, names, {**known, "val/gone.png": (0,) * 5}) == digest
    assert cache.states(root + os.sep, names, {**known, min(known): (0,) * 5}) != digest


def make_copy(data, to):
    shutil.copytree(data, to)
    return to


def test_a_command_line_with_notes_is_never_answered_here(made, stored, data):
    """--notes writes the registry (store.notes.add): the full command answers, every time."""
    from vbstore import Store

    args = args_for(stored, data, "--notes", "for the paper")
    settled()
    assert [run(args)[2], run(args)[2]] == ["full", "full"]
    assert answers(stored) == []
    with Store(stored) as store:
        noted = {o.id: store.notes.of(o.id) for o in store.ls("result")}
    assert {oid: notes for oid, notes in noted.items() if notes} == {made[2]: ["for the paper"]}
