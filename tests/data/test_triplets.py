"""2AFC triplets in the NIGHTS layout, and the generated triplets of known order."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from data_support import age, write_image

from vbstore.data import load_manifest
from vbstore.errors import BadInput, UsageError

HEADER = ["id", "left_vote", "right_vote", "votes", "ref_path", "left_path", "right_path", "split"]


def _nights(root, rows):
    for i in range(6):
        write_image(root / "ref" / f"{i}.png", i + 1)
        write_image(root / "distort" / f"{i}_0.png", i + 11)
        write_image(root / "distort" / f"{i}_1.png", i + 21)
    with open(root / "data.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(HEADER)
        writer.writerows(rows)
    age(root)
    return root


def _row(i, left, right, votes, split="test_imagenet"):
    return [f"{i:03d}", left, right, votes, f"ref/{i}.png", f"distort/{i}_0.png",
            f"distort/{i}_1.png", split]


@pytest.fixture
def nights(tmp_path):
    rows = [_row(0, 1, 5, 6), _row(1, 6, 0, 6, "test_no_imagenet"), _row(2, 2, 2, 4),
            _row(3, 7, 1, 8, "train"), _row(4, 0, 6, 6), _row(5, 3, 3, 6)]
    return _nights(tmp_path / "nights", rows)


def test_nights_layout_keeps_triplets_with_six_votes(store, nights):
    view = load_manifest(store, nights, split="test")
    assert view.layout == "triplets"
    # row 2 has 4 votes; row 3 is train; 0, 1, 4, 5 stay, with their images only
    assert len(view) == 12
    names = view.names
    triplets = view.doc["triplets"]
    assert [[names[i] for i in t[:3]] for t in triplets] == [
        [f"ref/{i}.png", f"distort/{i}_0.png", f"distort/{i}_1.png"] for i in (0, 1, 4, 5)]
    assert [t[3:] for t in triplets] == [[1, 5], [6, 0], [0, 6], [3, 3]]
    assert len(load_manifest(store, nights, split="train").doc["triplets"]) == 1
    assert len(load_manifest(store, nights / "data.csv", split="test").doc["triplets"]) == 4
    with pytest.raises(UsageError, match=r"has splits \(test_imagenet, test_no_imagenet, train\)"):
        load_manifest(store, nights)


def test_limit_counts_triplets_and_votes_change_the_manifest(store, nights):
    view = load_manifest(store, nights, split="test", limit=2)
    assert len(view.doc["triplets"]) == 2
    assert len(view) == 6  # three images per kept triplet
    before = load_manifest(store, nights, split="test")
    text = (nights / "data.csv").read_text().replace("000,1,5,6", "000,5,1,6")
    (nights / "data.csv").write_text(text)
    age(nights)
    after = load_manifest(store, nights, split="test")
    assert after.id != before.id
    assert after.digest != before.digest
    assert after.doc["samples"] == before.doc["samples"]


@pytest.mark.parametrize(
    ("edit", "error", "message"),
    [
        (lambda root: (root / "ref" / "4.png").unlink(), BadInput,
         r"bad triplet rows: .*data\.csv:6: ref/4\.png does not exist"),
        (lambda root: (root / "data.csv").write_text(""), BadInput,
         r"empty triplet tables: .*data\.csv"),
        (lambda root: (root / "data.csv").write_text(",".join(HEADER) + "\n"), BadInput,
         r"empty triplet tables: .*data\.csv: no rows"),
        (lambda root: (root / "data.csv").write_text("ref_path,left_path,right_path\n"), BadInput,
         r"missing columns: .*data\.csv: no left_vote, right_vote, votes column"),
        (lambda root: (root / "data.csv").write_text(
            ",".join(HEADER) + "\n" + ",".join(map(str, _row(0, "x", 5, 6))) + "\n"), BadInput,
         r"data\.csv:2: left_vote 'x' is not a number"),
        (lambda root: _nights(root, [_row(0, 1, 5, 6), _row(0, 6, 0, 6)]), BadInput,
         r"triplet tables with repeated ids: .*data\.csv: id '000' repeats"),
    ],
)
def test_bad_tables_name_the_file(store, nights, edit, error, message):
    edit(nights)
    with pytest.raises(error, match=message):
        load_manifest(store, nights, split="test", layout="triplets")
    assert store.ls() == []


def test_unknown_split_and_no_usable_triplet(store, nights):
    with pytest.raises(UsageError, match="no split 'val'"):
        load_manifest(store, nights, split="val")
    _nights(nights, [_row(0, 1, 2, 3)])
    with pytest.raises(BadInput, match="no triplet has 6 or more votes"):
        load_manifest(store, nights)


def test_generated_triplets_are_ordered_and_reproducible(store, tmp_path):
    from vbstore.data._make_triplets import make_triplets

    view = load_manifest(store, "triplets:count=12,size=32", split="test")
    assert len(view.doc["triplets"]) == 12
    assert len(view) == 36
    again = make_triplets(tmp_path / "again", count=12, size=32)
    assert load_manifest(store, again, split="test").digest == view.digest
    for ref, left, right, lv, rv in view.doc["triplets"]:
        images = [np.asarray(view.load_image(i), dtype=float) for i in (ref, left, right)]
        mild, strong = (images[1], images[2]) if lv > rv else (images[2], images[1])
        # the side people picked is the mild distortion: nearer the reference in pixels
        assert np.abs(mild - images[0]).mean() < np.abs(strong - images[0]).mean()
        assert "mild" in view.names[left if lv > rv else right]


def test_min_votes_chooses_the_triplets_and_the_default_is_the_same_manifest(store, nights):
    """VisBench's --min-votes: a data option of the triplets layout (default 6)."""
    default = load_manifest(store, nights, split="test")
    assert load_manifest(store, nights, split="test", min_votes=6).id == default.id
    looser = load_manifest(store, nights, split="test", min_votes=4)
    assert len(looser.doc["triplets"]) == 5  # row 2 (4 votes) joins
    assert looser.id != default.id
    with pytest.raises(BadInput, match="no triplet has 9 or more votes"):
        load_manifest(store, nights, split="test", min_votes=9)
    with pytest.raises(UsageError, match="min_votes must be an integer >= 0"):
        load_manifest(store, nights, split="test", min_votes=-1)
    with pytest.raises(UsageError, match="takes no min_votes option"):
        load_manifest(store, nights / "ref", min_votes=3)
