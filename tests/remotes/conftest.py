"""Fixtures for remote tests: two stores, a lineage, and real servers on 127.0.0.1.

Each server fixture stops exactly the server it started. The S3 server (moto) is started once
per module because it takes a moment; every test gets its own bucket, so tests stay isolated.
"""

from __future__ import annotations

import logging
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hub_server import HubServer
from remotes_support import AWS_SECRET, HF_SECRET, build_lineage


@pytest.fixture(autouse=True)
def remote_env(monkeypatch):
    """No ambient credentials, offline flags or probe memory leak into a test."""
    from vbstore.remotes import forget_unreachable

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN", "HF_ENDPOINT",
                 "HUGGING_FACE_HUB_TOKEN", "AWS_PROFILE", "AWS_SESSION_TOKEN",
                 "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VBSTORE_REMOTE_PROBE_TIMEOUT", "1")
    forget_unreachable()
    yield
    forget_unreachable()


@pytest.fixture
def stores(tmp_path):
    """Two empty stores, A and B."""
    from vbstore import Store

    with Store(tmp_path / "a") as a, Store(tmp_path / "b") as b:
        yield a, b


@pytest.fixture
def lineage(stores):
    """A small artifact graph in store A (see ``_lineage.build_lineage``)."""
    return build_lineage(stores[0])


@pytest.fixture
def hub(monkeypatch):
    """A Hub API test server; HF_ENDPOINT and HF_TOKEN point the real client at it."""
    server = HubServer().start()
    monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
    monkeypatch.setenv("HF_TOKEN", HF_SECRET)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def moto_server():
    """One moto S3 server for the module, on 127.0.0.1 and a free port."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no request log lines in test output
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3_url(moto_server, monkeypatch):
    """A fresh bucket on the moto server; returns ``(url, endpoint)``; AWS_* set to test values."""
    import boto3

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    bucket = f"vbs-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=moto_server).create_bucket(Bucket=bucket)
    return f"s3://{bucket}/team", moto_server

