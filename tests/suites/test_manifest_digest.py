import hashlib
import json

from vbstore.suites import manifest_from_files, manifest_sha256


def test_digest_by_hand_and_order_free():
    expected = hashlib.sha256(
        b'{"conditions":{"day":["a.png","b.png"],"night":["c.png"]},"version":1}'
    ).hexdigest()
    assert manifest_sha256({"night": ["c.png"], "day": ["b.png", "a.png"]}) == expected


def test_any_change_changes_it():
    base = {"day": ["a", "b"], "night": ["c"]}
    digest = manifest_sha256(base)
    for changed in (
        {"day": ["a", "b", "d"], "night": ["c"]},
        {"day": ["a"], "night": ["c"]},
        {"day": ["a", "x"], "night": ["c"]},
        {"day": ["a"], "night": ["b", "c"]},
    ):
        assert manifest_sha256(changed) != digest


def test_equal_to_the_visin_client_on_the_same_files(tmp_path):
    visin_suites = __import__("pytest").importorskip("visin.suites")
    (tmp_path / "day.txt").write_text("b.png\n  a.png \n\nnuit/é.png\n")
    (tmp_path / "night.txt").write_text("z.png\nc.png\n")
    files = {"day": tmp_path / "day.txt", "night": tmp_path / "night.txt"}
    ours = manifest_from_files(files)
    theirs = visin_suites.manifest_digest({k: visin_suites.read_split(v) for k, v in files.items()})
    assert ours["manifestSha256"] == theirs
    assert ours["conditions"] == [
        {"name": "day", "sampleCount": 3},
        {"name": "night", "sampleCount": 2},
    ]
    assert json.dumps(ours)  # the --json fragment is plain JSON
