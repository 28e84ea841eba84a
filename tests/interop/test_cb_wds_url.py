"""``cb:wds/NAME`` from a URL root, as CLIP_benchmark's recommended Hub copies are read: a
webdataset served over HTTP (on 127.0.0.1), read through CLIP_benchmark's own builder, gives the
samples, class names and templates CLIP_benchmark itself reads from it in its own process."""

from __future__ import annotations

import functools
import http.server
import io
import json
import tarfile
import threading

import numpy as np
import pytest
from PIL import Image

from vbstore.data import load_manifest

pytestmark = pytest.mark.slow

CLASSES = ["circle", "square", "triangle"]
TEMPLATES = ["a photo of a {c}.", "a drawing of a {c}."]


def _shards(root, n=7):
    """CLIP_benchmark's webdataset layout: test/nshards.txt, test/0.tar, classnames.txt,
    zeroshot_classification_templates.txt."""
    rng = np.random.default_rng(0)
    (root / "test").mkdir(parents=True)
    (root / "test" / "nshards.txt").write_text("1\n")
    (root / "classnames.txt").write_text("\n".join(CLASSES) + "\n")
    (root / "zeroshot_classification_templates.txt").write_text("\n".join(TEMPLATES) + "\n")
    with tarfile.open(root / "test" / "0.tar", "w") as tar:
        for i in range(n):
            image = io.BytesIO()
            Image.fromarray(rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)).save(image, "png")
            for ext, data in (("png", image.getvalue()), ("cls", str(i % 3).encode())):
                info = tarfile.TarInfo(f"s{i:04d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


@pytest.fixture
def served(tmp_path):
    _shards(tmp_path / "www" / "wds_tiny")
    handler = functools.partial(_Quiet, directory=str(tmp_path / "www"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


_THEIRS = """
import json, sys
from clip_benchmark.datasets.builder import build_dataset
ds = build_dataset("wds/tiny", root=sys.argv[1], split="test", transform=None, download=True)
labels = [int(target) for _, target in ds]
print(json.dumps({"classes": ds.classes, "templates": ds.templates, "labels": labels}))
"""


def test_a_url_root_reads_what_clip_benchmark_reads(clip_benchmark, clip_benchmark_peer, store,
                                                   served):
    pytest.importorskip("webdataset")
    template = served + "/wds_{dataset_cleaned}"
    view = load_manifest(store, "cb:wds/tiny", split="test", dataset_root=template,
                         download=True)
    doc = view.doc
    theirs = json.loads(clip_benchmark_peer(_THEIRS, served + "/wds_tiny").strip()
                        .splitlines()[-1])
    assert doc["classes"] == theirs["classes"] == CLASSES
    assert doc["source"]["templates"] == theirs["templates"] == TEMPLATES
    assert [s["label"] for s in doc["samples"]] == theirs["labels"]
    assert len(doc["samples"]) == 7
