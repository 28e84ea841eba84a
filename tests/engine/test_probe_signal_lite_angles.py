"""efficientnet_lite0's ImageNet features beat both the trivial predictor and random weights on
the two costliest probes, surface normals and orientation (about half of the time of
tests/engine/test_probe_signal_lite.py, which checks every other trained probe exactly so).

A file of its own so that pytest-xdist (``make test``, ``--dist loadfile``) runs these beside
the rest rather than after them; its module-scoped store writes the corpus inputs and extracts
their features again (about 20 s).
"""

from __future__ import annotations

import pytest
from test_probe_signal_lite import ANGLES, check_probe, corpus_store

CHECKED = ANGLES


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """One store and the corpus inputs for both cases."""
    yield from corpus_store(tmp_path_factory)


@pytest.mark.slow(cost=35)  # each about 7 times a probe of the other file
@pytest.mark.parametrize("task", CHECKED)
def test_lite0_beats_its_trivial_predictor_and_random_weights_on_angles(corpus, task):
    check_probe(corpus, task)
