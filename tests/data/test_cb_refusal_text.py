"""A ``cb:`` dataset CLIP_benchmark's builder cannot find is one line: the builder's reason,
then vbstore's fix, without the reason's own closing full stop before the ``;``."""

from __future__ import annotations

import pytest

from vbstore.data import _cbdata
from vbstore.errors import UsageError


class _Missing:
    """A builder whose files are missing, as torchvision's ImageNet says it."""

    @staticmethod
    def build_dataset(**_: object) -> None:
        raise RuntimeError("The archive ILSVRC2012_devkit_t12.tar.gz is not present in the root "
                           "directory or is corrupted. You need to download it externally and "
                           "place it in /data/imagenet1k.")


def test_a_missing_archive_is_named_with_the_fix_after_it(monkeypatch, tmp_path):
    monkeypatch.setattr(_cbdata, "_builder", lambda: _Missing)
    with pytest.raises(UsageError) as caught:
        _cbdata.open_cb(None, "imagenet1k", "test", {"dataset_root": str(tmp_path)})
    line = str(caught.value)  # the message, then its hint
    assert "ILSVRC2012_devkit_t12.tar.gz is not present" in line
    assert ".;" not in line
    assert line.endswith("point --dataset-root at the folder that holds it, or add --download")
