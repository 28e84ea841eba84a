"""Fixtures for the probe-task tests: tiny seeded data, fake text towers, a registry sandbox."""

from __future__ import annotations

import numpy as np
import pytest
import torch


@pytest.fixture
def blobs():
    """A maker of Gaussian class blobs: ``make(n, dim, n_classes, sep, seed) -> (x, y)``.

    Centres are drawn once per (dim, n_classes, sep) so a train and an eval split made with
    different seeds share them.
    """

    def make(n=200, dim=16, n_classes=4, sep=3.0, seed=0, centre_seed=123):
        centres = np.random.default_rng(centre_seed).normal(size=(n_classes, dim)) * sep
        rng = np.random.default_rng(seed)
        y = rng.integers(0, n_classes, size=n)
        x = centres[y] + rng.normal(size=(n, dim))
        return torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.int64)

    return make


@pytest.fixture
def registry_sandbox():
    """Registrations made in a test disappear after it."""
    from vbstore.tasks import _registry

    _registry._load_all()  # built-ins registered before the snapshot, never inside a test
    saved = dict(_registry._TASKS)
    yield
    _registry._TASKS.clear()
    _registry._TASKS.update(saved)


class LookupEncoder:
    """A deterministic fake CLIP text tower: a fixed vector per string, calls recorded."""

    def __init__(self, table):
        self.table = {k: torch.tensor(v, dtype=torch.float32) for k, v in table.items()}
        self.calls: list[list[str]] = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        return torch.stack([self.table[t] for t in texts])


class ClassNameEncoder:
    """Embeds a prompt as the one-hot of the (single) class name it contains."""

    def __init__(self, class_names):
        self.class_names = class_names
        self.calls: list[list[str]] = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        rows = []
        for text in texts:
            found = [i for i, name in enumerate(self.class_names) if name in text]
            assert len(found) == 1, f"prompt {text!r} names {len(found)} classes"
            rows.append(torch.nn.functional.one_hot(torch.tensor(found[0]), len(self.class_names)))
        return torch.stack(rows).float()


@pytest.fixture
def lookup_encoder():
    return LookupEncoder


@pytest.fixture
def class_name_encoder():
    return ClassNameEncoder
