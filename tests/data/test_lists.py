import json

import pytest
from data_support import age, write_image, write_mask

from vbstore.data import load_manifest
from vbstore.errors import BadInput, UsageError


@pytest.fixture
def pictures(tmp_path):
    root = tmp_path / "lists"
    for i in range(6):
        write_image(root / "img" / f"{i}.jpg", i)
        write_mask(root / "seg" / f"{i}.png", i)
    age(root)
    return root


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_csv_labels_with_conditions(store, pictures):
    (pictures / "val.csv").write_text(
        "image,label,condition\nimg/3.jpg,owl,fog\n./img/0.jpg,bat,\nimg/1.jpg,owl,fog\nimg/2.jpg,bat,clear\n"
    )
    view = load_manifest(store, pictures / "val.csv", split="val")
    assert view.layout == "list"
    assert view.target_type == "class"
    assert view.split == "val"
    assert view.classes == ["bat", "owl"]
    assert view.names == [f"img/{i}.jpg" for i in range(4)]
    assert view.labels() == [0, 1, 0, 1]
    assert view.conditions() == [None, "fog", "clear", "fog"]
    assert "condition" not in view.samples[0]
    assert view.root == pictures.resolve()
    assert view.load_image(3).size == (8, 8)
    assert load_manifest(store, pictures / "val.csv", limit=1).counts() == {"bat": 1, "owl": 1}


def test_csv_and_jsonl_of_the_same_samples_share_the_digest(store, pictures):
    (pictures / "a.csv").write_text("image,label\nimg/0.jpg,bat\nimg/1.jpg,owl\n")
    _jsonl(
        pictures / "a.jsonl",
        [{"image": "img/1.jpg", "label": "owl"}, {"image": "img/0.jpg", "label": "bat"}],
    )
    csv_view = load_manifest(store, pictures / "a.csv")
    jsonl_view = load_manifest(store, pictures / "a.jsonl")
    assert csv_view.id == jsonl_view.id  # the file format is not part of the manifest


def test_explicit_classes_fix_the_indices(store, pictures, tmp_path):
    (pictures / "a.csv").write_text("image,label\nimg/0.jpg,owl\n")
    classes = tmp_path / "classes.txt"
    classes.write_text("bat\nowl\nyak\n")
    view = load_manifest(store, pictures / "a.csv", classes=classes)
    assert view.classes == ["bat", "owl", "yak"]
    assert view.labels() == [1]
    with pytest.raises(BadInput, match=r"labels outside the given classes.*owl"):
        load_manifest(store, pictures / "a.csv", classes=["bat"])


def test_multi_label_lists(store, pictures):
    (pictures / "ml.csv").write_text(
        'image,labels\nimg/0.jpg,sky;tree\nimg/1.jpg,\nimg/2.jpg,"[""tree""]"\n'
    )
    view = load_manifest(store, pictures / "ml.csv")
    assert view.target_type == "multi_label"
    assert view.classes == ["sky", "tree"]
    assert [s["labels"] for s in view.samples] == [[0, 1], [], [1]]
    assert view.multi_hot().tolist() == [[1, 1], [0, 0], [0, 1]]
    assert view.counts() == {"sky": 1, "tree": 2}
    _jsonl(
        pictures / "ml.jsonl",
        [{"image": f"img/{i}.jpg", "labels": ["tree", "sky"][: i % 3]} for i in range(6)],
    )
    limited = load_manifest(store, pictures / "ml.jsonl", limit=4)
    assert len(limited) == 4


def test_target_lists(store, pictures):
    _jsonl(
        pictures / "t.jsonl",
        [{"image": f"img/{i}.jpg", "target": f"seg/{i}.png"} for i in range(3)],
    )
    view = load_manifest(store, pictures / "t.jsonl", target_type="masks")
    assert view.target_type == "masks"
    assert view.target_path(1) == pictures.resolve() / "seg" / "1.png"
    assert len({s["target"] for s in view.samples}) == 3


def test_caption_lists_merge_rows_of_one_image(store, pictures):
    _jsonl(
        pictures / "c.jsonl",
        [
            {"image": "img/0.jpg", "captions": ["a red square", "noise"]},
            {"image": "img/1.jpg", "captions": "a cat"},
            {"image": "img/0.jpg", "captions": ["a third caption"]},
        ],
    )
    view = load_manifest(store, pictures / "c.jsonl")
    assert view.target_type == "captions"
    assert view.classes == []
    assert view.captions() == [["a red square", "noise", "a third caption"], ["a cat"]]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("image,lable\nimg/0.jpg,a\n", "unknown columns lable"),
        ("image,label,labels\nimg/0.jpg,a,b\n", "2 target columns"),
        ("picture,label\nimg/0.jpg,a\n", "no image column"),
        ("image,label\nimg/0.jpg,a\nimg/0.jpg,b\n", "img/0.jpg is listed twice"),
        ("image,label\n/abs/0.jpg,a\n", "absolute"),
        ("image,label\nimg/0.jpg,\n", r"\.csv:2: empty class name"),
        (
            "image,label\nimg/0.jpg,a\nimg/9.jpg,a\nimg/8.jpg,b\n",
            r"2 missing or unreadable images: .*img/8.jpg.*img/9.jpg",
        ),
    ],
)
def test_bad_lists_are_refused_with_the_line(store, pictures, text, error):
    (pictures / "bad.csv").write_text(text)
    with pytest.raises(BadInput, match=error):
        load_manifest(store, pictures / "bad.csv")
    assert store.ls() == []


def test_a_list_of_another_format_is_an_unknown_layout(store, pictures):
    (pictures / "list.txt").write_text("img/0.jpg\n")
    with pytest.raises(UsageError, match="unknown layout"):
        load_manifest(store, pictures / "list.txt")
    (pictures / "x.jsonl").write_text('{"image": "img/0.jpg", "label": "a"}\n{\n')
    with pytest.raises(BadInput, match=r"x\.jsonl:2: not JSON"):
        load_manifest(store, pictures / "x.jsonl")
    assert store.ls() == []


def test_target_type_only_for_target_lists(store, pictures):
    (pictures / "a.csv").write_text("image,label\nimg/0.jpg,owl\n")
    with pytest.raises(UsageError, match="target_type applies to a list with a target column"):
        load_manifest(store, pictures / "a.csv", target_type="masks")


def test_unchanged_listing_reuses_its_manifest_and_a_relabel_does_not(store, pictures, monkeypatch):
    import vbstore.data._load as load_module

    csv_path = pictures / "val.csv"
    csv_path.write_text("image,label\nimg/0.jpg,bat\nimg/1.jpg,owl\n")
    first = load_manifest(store, csv_path)
    built = []
    real = load_module.build_document
    monkeypatch.setattr(load_module, "build_document",
                        lambda *a, **k: built.append(1) or real(*a, **k))
    assert load_manifest(store, csv_path).id == first.id
    assert built == []  # same listing, same file states: nothing hashed or re-encoded
    csv_path.write_text("image,label\nimg/0.jpg,owl\nimg/1.jpg,bat\n")
    relabelled = load_manifest(store, csv_path)
    assert built == [1]
    assert relabelled.id != first.id
    assert relabelled.labels() == [1, 0]
    assert relabelled.classes == ["bat", "owl"]
