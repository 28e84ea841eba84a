"""``--dataset-root`` as CLIP_benchmark reads it: a folder, a URL, or a template of either with
only its two fields; a URL asked for offline is refused at once, naming it."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner

from vbstore.cli import cli
from vbstore.data import load_manifest
from vbstore.data._cbdata import dataset_root, template_fields
from vbstore.errors import DataUnavailable, UsageError

HUB = "https://huggingface.co/datasets/clip-benchmark/wds_{dataset_cleaned}/tree/main"


def test_template_fields_are_clip_benchmarks():
    # CLIP_benchmark's cli fills the template with the name after wds/
    assert template_fields("wds/vtab/cifar10") == {"dataset": "vtab/cifar10",
                                                   "dataset_cleaned": "vtab-cifar10"}
    assert dataset_root(HUB, "wds/imagenet1k") == \
        "https://huggingface.co/datasets/clip-benchmark/wds_imagenet1k/tree/main"
    assert dataset_root("data/{dataset}", "mnist").endswith("data/mnist")


@pytest.mark.parametrize(("template", "shown"), [
    ("{foo}", "{foo}"),
    ("data/{dataset.__class__}", "{dataset.__class__}"),
    ("data/{dataset[0]}", "{dataset[0]}"),
    ("data/{dataset!r}", "{dataset!r}"),
    ("data/{dataset:{foo}}", "{dataset:{foo}}"),
    ("data/{}", "{}"),
])
def test_only_the_documented_fields_are_filled(store, template, shown):
    with pytest.raises(UsageError) as caught:
        load_manifest(store, "cb:mnist", split="test", dataset_root=template)
    assert f"names {shown}: only {{dataset}} and {{dataset_cleaned}} are filled in" in \
        str(caught.value)


def test_a_brace_that_does_not_pair_is_refused(store):
    with pytest.raises(UsageError, match="is not a template"):
        load_manifest(store, "cb:mnist", split="test", dataset_root="data/{dataset")


def test_a_url_root_offline_is_refused_at_once_naming_the_url(store, monkeypatch):
    monkeypatch.setenv("VBSTORE_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(DataUnavailable) as caught:
        load_manifest(store, "cb:wds/imagenet1k", split="test", dataset_root=HUB, download=True)
    assert time.monotonic() - start < 5  # one probe, never a client's retries
    assert "https://huggingface.co/datasets/clip-benchmark/wds_imagenet1k/tree/main" in \
        str(caught.value)
    assert caught.value.exit_code == 6


def test_a_url_root_needs_download_and_a_webdataset(store):
    with pytest.raises(UsageError, match="nothing is downloaded without --download"):
        load_manifest(store, "cb:wds/imagenet1k", split="test", dataset_root=HUB)
    with pytest.raises(UsageError, match="CLIP_benchmark reads URLs only for its webdataset"):
        load_manifest(store, "cb:imagenet1k", split="test", dataset_root=HUB, download=True)


def test_cli_keeps_a_url_root_and_refuses_it_offline_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("VBSTORE_OFFLINE", "1")
    out = CliRunner().invoke(cli, [
        "--store", str(tmp_path / "s"), "get", "result", "-b", "test_vit", "-t",
        "retrieval", "-d", "cb:wds/imagenet1k", "--split", "test",
        "--dataset-root", HUB, "--download", "--weights", "random"])
    assert out.exit_code == 6, out.output
    lines = [x for x in out.output.splitlines() if x.strip()]
    assert len(lines) == 1
    assert "https://huggingface.co/datasets/clip-benchmark/wds_imagenet1k/tree/main" in lines[0]
    assert "Traceback" not in out.output


def test_cli_refuses_an_unknown_field_in_one_line(tmp_path):
    out = CliRunner().invoke(cli, [
        "--store", str(tmp_path / "s"), "get", "result", "-b", "test_vit", "-t",
        "retrieval", "-d", "cb:mnist", "--split", "test",
        "--dataset-root", "{foo}", "--weights", "random"])
    assert out.exit_code == 2, out.output
    assert "names {foo}" in out.output
    assert len([x for x in out.output.splitlines() if x.strip()]) == 1
