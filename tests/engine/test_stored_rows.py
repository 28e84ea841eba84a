"""A second task on stored features loads no torch, and gives the numbers torch gave.

Retrieval (``ZeroShotTask.array = "numpy"``) reads the stored rows with ``safetensors.numpy``
and ranks them with similarities that are exact (``tasks._rows``). ``_torch_retrieval`` below is
retrieval as it was computed with torch before (float32 unit rows, a float32 matrix product,
torch's stable sort and float64 sums): both paths must give the same metrics, to the bit, on the
same stored rows, ties included.
"""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import vbstore
from vbstore.features import Features, pooled_rows
from vbstore.tasks import get_task

KW = dict(split="val", train_split="train", weights="random", input_size=32, progress=False)

# what scoring stored rows must not load: torch, and every module built on it (the backbones,
# the model machinery, image decoding)
UNLOADED = ("torch", "torchvision", "timm", "open_clip", "PIL", "vbstore.backbones._base",
            "vbstore.features._read", "vbstore.features._extract", "vbstore.features._packs",
            "vbstore.tasks._checks", "vbstore.tasks._metrics")


def _torch_ranking(feats: torch.Tensor, targets: torch.Tensor, metric: str = "cosine"):
    """Each query's gallery as torch ranked it (vbstore 209a8b5's ``Retrieval``, every block
    at once): per kept query, the relevance of each rank and whether a tie group ends there."""
    from vbstore.tasks._metrics import l2_normalise

    n = len(feats)
    x = l2_normalise(feats) if metric == "cosine" else feats.to(torch.float64)
    sims = x @ x.T if metric == "cosine" else -torch.cdist(x, x)
    sims[torch.arange(n), torch.arange(n)] = -torch.inf
    relevant = targets[:, None] == targets[None, :]
    relevant[torch.arange(n), torch.arange(n)] = False
    sorted_sims, order = torch.sort(sims, dim=1, descending=True, stable=True)
    sorted_relevant = relevant.gather(1, order)
    keep = sorted_relevant.any(dim=1)
    ends = sorted_sims[:, :-1] != sorted_sims[:, 1:]
    return sorted_sims[keep], sorted_relevant[keep], ends[keep]


def _numpy_ranking(feats: np.ndarray, targets: np.ndarray, metric: str = "cosine"):
    """The same, as retrieval now ranks (``tasks._rows``)."""
    from vbstore.tasks import _rows

    n = len(feats)
    if metric == "cosine":
        sims = _rows.cosine(*_rows.cosine_grid(feats), slice(0, n))
    else:
        grid, squares = _rows.l2_grid(feats)
        sims = _rows.negative_squared_distance(grid, squares, slice(0, n))
    sims[np.arange(n), np.arange(n)] = -np.inf
    relevant = targets[:, None] == targets[None, :]
    relevant[np.arange(n), np.arange(n)] = False
    order = np.argsort(-sims, axis=1, kind="stable")
    sorted_sims = np.take_along_axis(sims, order, axis=1)
    sorted_relevant = np.take_along_axis(relevant, order, axis=1)
    keep = sorted_relevant.any(axis=1)
    ends = sorted_sims[:, :-1] != sorted_sims[:, 1:]
    return sorted_sims[keep], sorted_relevant[keep], ends[keep]


def _torch_retrieval(feats: torch.Tensor, targets: torch.Tensor, metric: str = "cosine",
                     ks: tuple[int, ...] = (1, 5, 10)) -> dict[str, float]:
    """Retrieval's metrics as torch computed them (209a8b5: float32 unit rows, a float32
    matrix product, torch's float64 sums)."""
    from vbstore.tasks._metrics import average_precision_ranked

    n = len(feats)
    sorted_sims, sorted_relevant, _ = _torch_ranking(feats, targets, metric)
    used = len(sorted_relevant)
    metrics = {f"recall@{k}": int(sorted_relevant[:, : min(k, n - 1)].any(dim=1).sum()) / used
               for k in ks}
    metrics["mAP"] = float(average_precision_ranked(sorted_sims, sorted_relevant).sum()) / used
    return metrics


def _numpy_retrieval(feats: np.ndarray, targets: np.ndarray, metric: str = "cosine",
                     ks: tuple[int, ...] = (1, 5, 10)) -> dict[str, float]:
    task = get_task("retrieval")
    params = {"metric": metric, "topk": ",".join(map(str, ks))}
    return task.evaluate_zero_shot(feats, targets, params, {})


@pytest.fixture
def stored(store, shapes):
    """A store holding the val split's features (computed by a first task), its rows read both
    ways, and their labels."""
    first = vbstore.get_result("test_cnn", "classification", shapes, shapes, store=store,
                               params={"epochs": 2}, **KW)
    features_id = first.record.inputs["eval_features"]
    return store, features_id, Features(store, features_id).pooled(), first


def test_rows_read_without_torch_are_the_features_torch_reads(stored):
    store, features_id, tensor, _ = stored
    rows = pooled_rows(store, features_id)
    assert rows.dtype == np.float32
    assert rows.tobytes() == tensor.numpy().tobytes()


@pytest.mark.parametrize("metric", ["cosine", "l2"])
def test_numpy_and_torch_rank_stored_rows_alike_ties_included(stored, metric):
    """Retrieval's numbers depend only on each query's ranking: the relevance at each rank and
    where tie groups end. The numpy path ranks exactly as torch did, on stored rows, their exact
    duplicates and scaled copies (ties), and coarse rows full of tied similarities; so recall@k
    (counts) is the same to the bit, and mAP up to the order of its float64 sums (now correctly
    rounded: ``math.fsum``, where torch's order depends on its CPU dispatch)."""
    store, features_id, _, _ = stored
    rows = pooled_rows(store, features_id)
    labels = np.arange(len(rows)) % 3
    # ties: every stored row twice (exact duplicates), and once more scaled by 2, which cosine
    # cannot tell apart from the row itself (nor float32: a power of two scales exactly)
    tied = np.concatenate([rows, rows, rows * 2])
    tied_labels = np.concatenate([labels, (labels + 1) % 3, labels])
    for x, y in ((rows, labels), (tied, tied_labels)):
        _, torch_relevant, torch_ends = _torch_ranking(torch.from_numpy(x), torch.from_numpy(y),
                                                       metric)
        _, numpy_relevant, numpy_ends = _numpy_ranking(x, y, metric)
        assert np.array_equal(numpy_relevant, torch_relevant.numpy()), (metric, len(x))
        # tie groups among the ranks that count (the query itself, last at -inf, aside)
        assert np.array_equal(numpy_ends[:, :-1], torch_ends[:, :-1].numpy()), (metric, len(x))
        assert (metric != "cosine" or len(x) != len(tied)
                or not numpy_ends[:, :-1].all()), "the duplicates must tie"
        for ks in ((1, 5, 10), (2, 3)):
            new = _numpy_retrieval(x, y, metric, ks)
            old = _torch_retrieval(torch.from_numpy(x), torch.from_numpy(y), metric, ks)
            assert {k: v for k, v in new.items() if k != "mAP"} == {
                k: v for k, v in old.items() if k != "mAP"}
            assert new["mAP"] == pytest.approx(old["mAP"], rel=1e-14, abs=0)


def test_exact_similarities_tie_exactly(stored):
    """The similarities do not depend on a library's summation order: the duplicate of a row,
    and the row scaled by a power of two, tie with it exactly against every query."""
    from vbstore.tasks import _rows

    store, features_id, _, _ = stored
    rows = pooled_rows(store, features_id)
    x = np.concatenate([rows, rows[:1], rows[:1] * 2, rows[:1] / 8])
    grid, norms = _rows.cosine_grid(x)
    sims = _rows.cosine(grid, norms, slice(0, len(x)))
    n = len(rows)
    for copy in (n, n + 1, n + 2):
        assert (sims[:, 0] == sims[:, copy]).all()
    # every dot product of grid rows is an integer below 2**53: exact in any order
    assert np.abs(grid).max() <= 2**_rows.GRID_BITS
    assert (np.abs(grid) @ np.abs(grid).T).max() < 2**53
    # a transposed product (another BLAS path) gives the very same bits
    assert (grid @ grid.T == (grid.T.copy().T @ grid.T.copy())).all()
    assert np.array_equal(_rows.cosine(grid, norms, slice(0, n)), sims[:n])


def test_cosines_equal_in_exact_arithmetic_are_equal_bits():
    """Coarse rows (half-integers) have many cosines that are equal in exact arithmetic; float32
    unit rows split such ties by rounding noise (torch did: its ranking of these rows is not a
    reference), the exact similarities keep every one between rows of one norm."""
    from fractions import Fraction

    from vbstore.tasks import _rows

    rng = np.random.default_rng(0)
    coarse = (rng.normal(size=(60, 6)) * 2).round().astype(np.float32) / 2
    coarse[coarse.sum(axis=1) == 0, 0] = 1.0
    sims = _rows.cosine(*_rows.cosine_grid(coarse), slice(0, len(coarse)))
    whole = [[int(v * 2) for v in row] for row in coarse]
    square = [sum(v * v for v in row) for row in whole]
    tied = 0
    for q in range(len(whole)):
        dots = [sum(a * b for a, b in zip(whole[q], row, strict=True)) for row in whole]
        for a in range(len(whole)):
            for b in range(a + 1, len(whole)):
                if square[a] == square[b] and dots[a] == dots[b]:
                    tied += 1
                    assert sims[q, a] == sims[q, b]
                exact_a = Fraction(dots[a]) ** 2 / (square[a] * square[q])
                exact_b = Fraction(dots[b]) ** 2 / (square[b] * square[q])
                if (dots[a] > 0) == (dots[b] > 0) and exact_a != exact_b:
                    # ordered as in exact arithmetic, unless closer than a float32 step
                    bigger = (exact_a > exact_b) == (dots[a] > 0)
                    assert (sims[q, a] >= sims[q, b]) if bigger else (sims[q, a] <= sims[q, b])
    assert tied > 50  # the check above ran on that many ties


def test_second_task_on_stored_rows_loads_no_torch(tmp_path, shapes):
    args = ["--store", str(tmp_path), "get", "result", "-b", "test_cnn", "-d", shapes,
            "--split", "val", "--weights", "random", "--input-size", "32", "--json"]
    from click.testing import CliRunner

    from vbstore.cli import cli

    # the features stored by a first task, computed in this process: the next is under test
    first = CliRunner().invoke(cli, [*args, "-t", "classification", "--train-data", shapes,
                                     "--train-split", "train", "-p", "epochs=2"])
    assert first.exit_code == 0, first.output
    code = (f"import sys, json, vbstore.cli\nUNLOADED = {UNLOADED!r}\n"
            "try:\n    vbstore.cli.cli(sys.argv[1:], standalone_mode=False)\n"
            "finally:\n    print(json.dumps(sorted(m for m in UNLOADED if m in sys.modules)))")
    second = subprocess.run([sys.executable, "-c", code, *args, "-t", "retrieval"],
                            capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    out = second.stdout
    answer, loaded = json.loads(out[: out.rindex("[")]), json.loads(out[out.rindex("["):])
    assert not answer["from_cache"]  # computed now, from the stored rows
    assert answer["features"]["eval"]["stored"]
    assert loaded == []
    # the numbers torch gives on the same stored rows
    with vbstore.Store(tmp_path) as store:
        feats = Features(store, answer["features"]["eval"]["id"]).pooled()
        manifest = store.read_json(answer["record"]["data"]["eval"]["manifest"])
    labels = torch.tensor([sample["label"] for sample in manifest["samples"]])
    assert answer["record"]["metrics"] == _torch_retrieval(feats, labels)


def test_training_or_applying_a_head_loads_no_remotes():
    """``vbstore.heads`` loads its files and remotes rooms on first use: the compute path
    (save_head, load_head, head_record) imports no remotes package, urllib or ssl."""
    code = ("import sys, json\nfrom vbstore.engine import _toolbox\n"
            "from vbstore.heads import head_record, load_head, save_head\n"
            "print(json.dumps([m for m in ('vbstore.remotes', 'vbstore.heads._share', "
            "'urllib.request', 'ssl') if m in sys.modules]))\n"
            "from vbstore.heads import push_head, import_head\n"
            "print(json.dumps('vbstore.remotes' in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    before, after = proc.stdout.splitlines()
    assert json.loads(before) == []
    assert json.loads(after) is True  # the names are all still there, loaded when asked


def test_descending_order_is_a_stable_descending_sort():
    """float32 scores sorted as int64 keys give exactly the stable descending order: ties (also
    0.0 against -0.0) in column order, negatives, -inf last."""
    from vbstore.tasks import _rows

    rng = np.random.default_rng(0)
    scores = (rng.normal(size=(40, 300)) * 4).round().astype(np.float32) / 4  # many ties
    scores[:, 7] = -0.0
    scores[:, 9] = 0.0
    scores[np.arange(40), np.arange(40)] = -np.inf
    scores[3] = 1.5  # a row of one tie
    expected = np.argsort(-scores, axis=1, kind="stable")
    assert np.array_equal(_rows.descending_order(scores), expected)
    as64 = scores.astype(np.float64)  # other dtypes: the stable argsort itself
    assert np.array_equal(_rows.descending_order(as64), expected)
