"""open_clip's own log lines are held while a model is made; news is said once, as a warning."""

from __future__ import annotations

import logging
import warnings

import pytest

from vbstore.backbones import build_backbone


def test_no_pretrained_weights_line_does_not_leak(tiny_clip, caplog):
    caplog.set_level(logging.WARNING)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        build_backbone(f"open_clip:{tiny_clip}", weights="random", seed=1)
    assert not [r for r in caplog.records if "No pretrained weights" in r.getMessage()]
    assert not [w for w in said if "open_clip says" in str(w.message)]


def test_other_open_clip_news_is_said_once_in_vbstores_words(caplog):
    pytest.importorskip("open_clip")
    from vbstore.backbones.open_clip import _open_clip_logs

    caplog.set_level(logging.WARNING)
    record = logging.LogRecord("root", logging.WARNING, "/x/open_clip/factory.py", 1, "partly",
                               None, None)

    def open_clip_logs_twice() -> None:
        with _open_clip_logs("X"):
            logging.getLogger().handle(record)
            logging.getLogger().handle(record)

    with pytest.warns(UserWarning, match="open_clip:X: open_clip says: partly") as said:
        open_clip_logs_twice()
    assert len(said) == 1
    assert not caplog.records
