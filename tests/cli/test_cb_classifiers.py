"""CLIP_benchmark's ``--save_clf`` / ``--load_clfs`` and ``--task auto`` as a user runs them:
a saved classifier loads back to the same numbers under another id, its content (not its
name) is the question, a file that does not fit is one line before anything is computed, and
``-t auto`` is the task CLIP_benchmark's ``--task auto`` picks."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from clip_support import clip_loader, registered_clip

CLIP = "clf_clip:tiny@v1"


_load = clip_loader()


@pytest.fixture(scope="module", autouse=True)
def _clf_clip():
    with registered_clip("clf_clip", _load):
        yield


def _prototypes(folder) -> torch.Tensor:
    """(8, 5): the normalised image embeddings of each class of the val split, averaged."""
    from pathlib import Path

    from PIL import Image

    model, transform, _ = _load("tiny", "v1")
    columns = []
    for name in sorted(p.name for p in (Path(folder) / "val").iterdir()):
        images = [transform(Image.open(f).convert("RGB"))
                  for f in sorted((Path(folder) / "val" / name).iterdir())]
        with torch.no_grad():
            feats = torch.nn.functional.normalize(model.encode_image(torch.stack(images)), dim=-1)
        columns.append(feats.mean(0))
    return torch.stack(columns, dim=1)


def _ok(out) -> dict:
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def _results(run) -> list:
    return _ok(run("ls", "results", "--json"))


def test_a_saved_classifier_loads_back_as_another_result(run, shapes, tmp_path):
    common = ["-b", CLIP, "-t", "zeroshot_classification", "-d", shapes, "--split", "val",
              "--json"]
    saved = tmp_path / "clf.pt"
    plain = _ok(run("get", "result", *common, "--save-clf", str(saved)))
    clf = torch.load(saved, weights_only=True)
    assert (clf.shape, clf.dtype) == ((8, 5), torch.float32)  # (D, C): 8 dims, 5 shapes
    torch.testing.assert_close(clf.norm(dim=0), torch.ones(5))  # unit class embeddings
    # a stored result writes the same file (CLIP_benchmark's underscore spelling too)
    again = tmp_path / "again.pt"
    assert _ok(run("get", "result", *common, "--save_clf", str(again)))["from_cache"]
    assert torch.equal(torch.load(again, weights_only=True), clf)

    loaded = _ok(run("get", "result", *common, "--load-clfs", str(saved)))
    assert loaded["record"]["metrics"] == plain["record"]["metrics"]
    # at the baseline (random tiny towers), the likely cause named is the classifier, not prompts
    said = run("get", "result", *common[:-1], "--load-clfs", str(saved)).output
    assert "loaded classifiers (load_clfs) made for other data" in said
    assert "prompts or class names" not in said
    assert loaded["id"] != plain["id"]
    assert loaded["record"]["params"]["load_clfs"] != str(saved)  # the tensors' id, not a path
    # the same question however it is asked: -p, the underscore flag, run TASK, another name
    copy = tmp_path / "copy.pt"
    shutil.copy(saved, copy)
    for asked in (("get", "result", *common, "-p", f"load_clfs={saved}"),
                  ("get", "result", *common, "--load_clfs", str(copy)),
                  ("run", "zeroshot_classification", *common[:2], *common[4:],
                   "--load-clfs", str(copy)),
                  ("run", "zeroshot_classification", *common[:2], *common[4:],
                   "--load_clfs", str(saved))):
        assert _ok(run(*asked))["id"] == loaded["id"], asked
    # two files averaged (repeated or comma-separated): another question
    twice = _ok(run("get", "result", *common, "--load-clfs", str(saved), "--load-clfs",
                    str(copy)))
    assert twice["id"] not in (loaded["id"], plain["id"])
    assert _ok(run("get", "result", *common, "--load-clfs", f"{saved},{copy}"))["id"] == \
        twice["id"]
    # another classifier in the same file: another result, other numbers (class prototypes:
    # each class's mean image embedding, which the tiny text tower's classes are not)
    torch.save(_prototypes(shapes), copy)
    other = _ok(run("get", "result", *common, "--load-clfs", str(copy)))
    assert other["id"] != loaded["id"]
    assert other["record"]["metrics"]["acc1"] > loaded["record"]["metrics"]["acc1"]
    # run TASK writes the classifier too
    by_run = tmp_path / "run.pt"
    _ok(run("run", "zeroshot_classification", *common[:2], *common[4:], "--save-clf",
            str(by_run)))
    assert torch.equal(torch.load(by_run, weights_only=True), clf)


@pytest.mark.parametrize(("made", "says"), [
    (torch.zeros(7, 5), "the classifier is (7, 5), made for 7-dim embeddings, but this "
                        "backbone's image embeddings have 8"),
    (torch.zeros(8, 4), "the classifier is (8, 4), 4 classes, but the data has 5"),
    (torch.zeros(8), "holds a torch.float32 tensor of shape (8,), not a (D, C) matrix"),
    ({"weight": torch.zeros(8, 5)}, "holds a dict, not a tensor"),
    ("text", "is not a tensor file torch.save wrote"),
    (torch.full((8, 5), float("nan")), "holds NaN or Inf"),
])
def test_a_classifier_that_does_not_fit_is_one_line_and_nothing_is_stored(run, shapes,
                                                                          tmp_path, made, says):
    common = ["-b", CLIP, "-t", "zeroshot_classification", "-d", shapes, "--split", "val"]
    _ok(run("get", "result", *common, "--json"))  # the backbone is known: D is checked early
    before = _results(run)
    path = tmp_path / "bad.pt"
    if made == "text":
        path.write_text("not a tensor\n")
    else:
        torch.save(made, path)
    for extra in ((), ("--dry-run",)):
        out = run("get", "result", *common, "--load-clfs", str(path), *extra)
        assert out.exit_code == 2, out.output
        assert says in out.output
        assert len(out.output.strip().splitlines()) == 1
    assert _results(run) == before


def test_save_clf_is_refused_where_there_is_no_classifier(run, shapes, tmp_path):
    clf = tmp_path / "clf.pt"
    out = run("get", "result", "-b", CLIP, "-t", "knn", "-d", shapes, "--split", "val",
              "--train-data", shapes, "--train-split", "train", "--save-clf", str(clf))
    assert out.exit_code == 2
    assert "task 'knn' scores with none" in out.output
    out = run("get", "result", "-b", CLIP, "-t", "zeroshot_classification", "-d", shapes,
              "--split", "val", "--save-clf", str(clf), "--dry-run")
    assert out.exit_code == 2
    assert "--dry-run runs nothing" in out.output
    assert not clf.exists()
    assert _results(run) == []
    # prompts beside loaded classifiers would name a setting no number depends on
    torch.save(torch.zeros(8, 5), clf)
    out = run("get", "result", "-b", CLIP, "-t", "zeroshot_classification", "-d", shapes,
              "--split", "val", "--load-clfs", str(clf), "-p", "templates=photo")
    assert out.exit_code == 2
    assert "templates 'photo' and load_clfs disagree" in out.output


def test_task_auto_is_the_task_clip_benchmark_picks(run, shapes):
    common = ["-b", CLIP, "-d", shapes, "--split", "val", "--json"]
    named = _ok(run("get", "result", "-t", "zeroshot_classification", *common))
    auto = _ok(run("get", "result", "-t", "auto", *common))
    assert (auto["id"], auto["record"]["task"]) == (named["id"], "zeroshot_classification")
    # a caption set's name picks retrieval, as sweep --tasks auto does: its recall_k is taken
    # (the data is then asked for its root), where classification has no such parameter
    out = run("get", "result", "-t", "auto", "-b", CLIP, "-d", "cb:wds/flickr30k", "--split",
              "test", "-p", "recall_k=5")
    assert out.exit_code == 2
    assert "cb:wds/flickr30k reads its files from a dataset root" in out.output
    out = run("get", "result", "-t", "auto", *common[:-1], "-p", "recall_k=5")
    assert out.exit_code == 2
    assert "task 'zeroshot_classification' has no parameter 'recall_k'" in out.output
    assert "-t auto picked zeroshot_classification for " in out.output
    # a backbone the picked task cannot run: the refusal says the task was auto's pick
    out = run("get", "result", "-t", "auto", "-b", "test_vit", "--weights", "random", "-d",
              shapes, "--split", "val")
    assert out.exit_code == 2
    assert "needs a CLIP backbone" in out.output
    assert f"-t auto picked zeroshot_classification for {shapes}" in out.output
    out = run("get", "result", "-t", "auto", "-b", CLIP, "--suite", "some@1")
    assert out.exit_code == 2
    assert "-t auto picks the task from --data" in out.output


PLUGIN = '''
import torch
from torchvision import transforms
from vbstore.backbones import register_clip_loader


class TinyClip(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.visual = torch.nn.Linear(3 * 16 * 16, 8)
        self.words = torch.nn.Embedding(64, 8)

    def encode_image(self, images):
        return self.visual(images.flatten(1))

    def encode_text(self, tokens):
        return self.words(tokens).mean(dim=1)


def tokenize(texts):
    ids = [[sum(map(ord, w)) % 64 for w in t.split()][:6] for t in texts]
    return torch.tensor([row + [0] * (6 - len(row)) for row in ids])


@register_clip_loader("answer_clip")
def load(model_name, pretrained, cache_dir=None, device="cpu"):
    torch.manual_seed(0)
    transform = transforms.Compose([transforms.Resize(16), transforms.CenterCrop(16),
                                    transforms.ToTensor()])
    return TinyClip().to(device), transform, tokenize
'''


# ``vbstore ARGS+EXTRA`` for each EXTRA in turn, in this one process (the entry point's own
# main, whose answer cache answers before click loads), each past the racy window of the one
# before: after each, whether click was loaded (the full command ran, or an earlier one in this
# process did) and what the file --save-clf names holds
STEPS = """
import json, os, sys, time
import vbstore.cli
from vbstore.store import _answers
args, saved, steps = json.loads(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
said = []
for extra in steps:
    time.sleep(2 * _answers.RACY_NS / 1e9)  # past the racy window: an answer is recorded
    if os.path.exists(saved):
        os.unlink(saved)
    try:
        vbstore.cli.main(args + extra)
    except SystemExit as exc:
        if exc.code:
            raise
    written = open(saved, "rb").read().hex() if os.path.exists(saved) else None
    said.append({"click": "click" in sys.modules, "written": written})
print("STEPS", json.dumps(said), file=sys.stderr)
"""


@pytest.mark.slow
def test_save_clf_writes_its_file_every_time_never_from_the_answer_cache(shapes, tmp_path):
    """A repeated command line is answered before click loads (the answer cache), which would
    print the result and write no file: --save-clf is always the full command's."""
    import subprocess
    import sys

    plugin = tmp_path / "answer_clip.py"
    plugin.write_text(PLUGIN)
    saved = tmp_path / "clf.pt"
    args = ["--store", str(tmp_path / "s"), "get", "result", "--plugin", str(plugin), "-b",
            "answer_clip:tiny@v1", "-t", "zeroshot_classification", "-d", shapes, "--split",
            "val"]

    def by(*steps):
        proc = subprocess.run([sys.executable, "-c", STEPS, json.dumps(args), str(saved),
                               json.dumps(steps)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stderr.rsplit("STEPS ", 1)[1])

    # the full command computes; its answer is recorded by the time the line is repeated
    computed, _ = by([], [])
    assert computed == {"click": True, "written": None}
    save = ["--save-clf", str(saved)]
    cached, first, again = by([], save, save)  # a fresh process
    assert cached == {"click": False, "written": None}  # the cache answers this command line
    assert first["written"] is not None  # ...but not with --save-clf: the full command wrote it
    assert again["written"] == first["written"]  # nor once a --save-clf line has run


def test_val_proportion_and_fewshot_k_take_clip_benchmarks_spellings(run, shapes):
    data = ["-d", shapes, "--split", "val", "--train-data", shapes, "--train-split", "train"]
    common = ["-b", CLIP, "-t", "linear_probe", *data, "--json"]
    by_p = _ok(run("get", "result", *common, "-p", "val_proportion=0.4", "-p", "fewshot_k=-1"))
    assert by_p["record"]["params"]["val_proportion"] == 0.4
    for flags in (("--val-proportion", "0.4", "--fewshot-k", "-1"),
                  ("--val_proportion", "0.4", "--fewshot_k", "-1")):
        assert _ok(run("get", "result", *common, *flags))["id"] == by_p["id"], flags
        assert _ok(run("run", "linear_probe", *common[:2], *common[4:], *flags))["id"] == \
            by_p["id"], flags
    out = run("get", "result", *common, "--val-proportion", "0.4", "-p", "val_proportion=0.2")
    assert out.exit_code == 2
    assert "--val-proportion 0.4 and -p val_proportion=0.2 disagree" in out.output


@pytest.mark.parametrize(("tensors", "says"), [
    ({"0": torch.full((8, 5), float("nan"))}, "holds NaN or Inf"),
    ({"weight": torch.zeros(8, 5)}, "not classifiers 0, 1"),
    ({"0": torch.zeros(8, 5), "1": torch.zeros(8, 4)}, "cannot be averaged"),
])
def test_a_stored_object_named_as_load_clfs_passes_the_files_checks(run, shapes, tmp_path,
                                                                    tensors, says):
    # -p load_clfs=ID (a record's params, replayed) named a stored tensors object that no file
    # check had read: NaN scored, another object's tensor names failed with a KeyError
    from vbstore.store import to_safetensors_bytes

    _a_stored_param_is_refused(run, shapes, tmp_path, "load_clfs",
                               to_safetensors_bytes(tensors, "tensors", {}), "tensors", says,
                               also=("--dry-run",))


@pytest.mark.parametrize(("entries", "says"), [
    (["a photo"], "has no {c} placeholder"),
    (["a {c}", "a {c}", "{x} {c}"], "has a placeholder other than {c}"),
    ({"not": "a list"}, "is no list of templates"),
])
def test_a_stored_blob_named_as_templates_passes_the_files_checks(run, shapes, tmp_path,
                                                                  entries, says):
    # -p templates=ID named any stored blob, read by no template check: a template without
    # {c} scored every class with one prompt
    from vbstore import canonical

    _a_stored_param_is_refused(run, shapes, tmp_path, "templates", canonical.dumps(entries),
                               "blob", says)


def _a_stored_param_is_refused(run, shapes, tmp_path, param, data, kind, says, also=()):
    """``-p PARAM=ID`` naming ``data`` stored as ``kind`` is refused in one line saying
    ``says`` (exit 2), also with each flag of ``also``, and no result is stored."""
    from vbstore import Store

    common = ["-b", CLIP, "-t", "zeroshot_classification", "-d", shapes, "--split", "val"]
    _ok(run("get", "result", *common, "--json"))
    before = _results(run)
    store = Store(tmp_path / "s")
    oid = store.put_bytes(data, kind)
    store.close()
    for extra in ((), *((flag,) for flag in also)):
        out = run("get", "result", *common, "-p", f"{param}={oid}", *extra)
        assert out.exit_code == 2, out.output
        assert says in out.output
        assert len(out.output.strip().splitlines()) == 1
    assert _results(run) == before
