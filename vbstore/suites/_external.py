"""Results computed elsewhere, judged as Visin judges them: a results file plus the evidence
flags ``visin evaluate`` takes (checkpoint, sample counts, data, protocol, evaluator, classes).

A Visin results file is the condition → class → metric object an evaluator writes
(``{"day": {"overall": {"mIoU": 0.78}, "road": {"IoU": 0.91}}}``); the suite names which metrics
count and every other number is kept. The checkpoint is named by the SHA-256 of the weights file
that was loaded (Visin's ``local_checkpoint``) or by a Hub repo at a full commit, never by a path.
Nothing here is verified: it is what the evaluator reports, and the evidence level says so.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import UsageError
from . import _files
from ._suite import EXTENSION, normalize, protocol_digest, read_suite_file

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_BLOCK = 1 << 20


def is_visin_results(loaded: Any) -> bool:
    """Whether a loaded JSON value is a condition → class → metric object."""
    return (
        isinstance(loaded, dict)
        and bool(loaded)
        and all(
            isinstance(classes, dict)
            and all(isinstance(metrics, dict) for metrics in classes.values())
            for classes in loaded.values()
        )
    )


def read_visin_results(path: str | Path) -> dict[str, dict[str, dict[str, Any]]]:
    """The results object of a Visin results file.

    Raises:
        UsageError: unreadable, too large, not UTF-8 or JSON, or not condition → class →
            metric.
    """
    file = Path(path)
    text = _files.read_text(file, "results file", _files.MAX_RESULTS_BYTES,
                           hint="split it into several files")
    _files.check_values(text, file.name, _files.MAX_RESULTS_VALUES)
    loaded = _files.loads(text, file.name)
    if not is_visin_results(loaded):
        raise UsageError(
            f"{file.name} is not a results object: conditions, then classes, then metrics",
            hint='e.g. {"day": {"overall": {"miou": 0.78}}}',
        )
    return loaded


def numbers_only(results: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The numbers of a results object (a ``{"value": x}`` field reads as x); text is dropped."""
    out: dict[str, Any] = {}
    for condition, classes in results.items():
        for name, metrics in classes.items():
            for key, value in metrics.items():
                if isinstance(value, Mapping) and "value" in value:
                    value = value["value"]
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    out.setdefault(str(condition), {}).setdefault(str(name), {})[str(key)] = value
    return out


def file_checkpoint(path: str | Path, label: str | None = None, weights: str = "checkpoint"
                    ) -> dict[str, str]:
    """A checkpoint named by the SHA-256 of the file that was loaded, as Visin names it.

    Raises:
        UsageError: the file cannot be read.
    """
    file = Path(path)
    digest = hashlib.sha256()
    try:
        with file.open("rb") as handle:
            while block := handle.read(_BLOCK):
                digest.update(block)
    except OSError as exc:
        raise UsageError(f"cannot read the checkpoint {file}: {exc.strerror}") from None
    return {"id": f"sha256:{digest.hexdigest()}", "label": label or file.stem, "weights": weights}


def hub_checkpoint(repo: str, commit: str, label: str | None = None,
                   weights: str = "checkpoint") -> dict[str, str]:
    """A checkpoint on the Hugging Face Hub at a full commit (a branch moves).

    Raises:
        UsageError: the commit is not 40 hex characters.
    """
    if not _COMMIT.match(commit.lower()):
        raise UsageError(f"--hub-commit {commit!r} is not a full commit",
                         hint="the 40-character commit hash, never a branch or a tag")
    return {"id": f"hf:{repo}@{commit.lower()}", "label": label or repo, "weights": weights}


def parse_data(text: str) -> dict[str, str]:
    """Visin's ``--data KIND=VALUE``: ``external=<manifest sha256>``, ``visin=<archive sha256>``
    or ``hf=org/name@<commit>``.

    Raises:
        UsageError: another shape.
    """
    kind, sep, value = text.partition("=")
    if kind == "external" and sep and _SHA256.match(value):
        return {"kind": "external", "manifestSha256": value}
    if kind == "visin" and sep and _SHA256.match(value):
        return {"kind": "visin", "archiveSha256": value}
    repo, at, commit = value.partition("@")
    if kind == "hf" and sep and at and repo and _COMMIT.match(commit):
        return {"kind": "hf", "repo": repo, "commit": commit}
    raise UsageError(f"--data {text!r} is not KIND=VALUE",
                     hint="external=<manifest sha256>, visin=<archive sha256> or "
                          "hf=org/name@<40-character commit>")


def protocol_evidence(file: str | Path | None = None, digest: str | None = None
                      ) -> dict[str, Any] | None:
    """What protocol the evaluator ran: a suite or protocol file (its digest, task and
    parameters), or only the digest it has.

    Raises:
        UsageError: both given and they disagree, or an unreadable file.
    """
    if file is None:
        return {"digest": digest} if digest else None
    loaded = read_suite_file(file)
    suite = loaded if "protocol" in loaded else {"slug": "x", "version": 1, "name": "x",
                                                  "protocol": loaded}
    doc = normalize(suite)
    ran = {"digest": protocol_digest(doc["protocol"]), "task": doc["protocol"].get("task"),
           "params": doc[EXTENSION]["params"]}
    if digest and digest != ran["digest"]:
        raise UsageError(f"--protocol-digest {digest[:12]} is not the digest of {file} "
                         f"({ran['digest'][:12]})", hint="give one of them")
    return ran


def classes_evidence(scored: str | None, ignored: str | None) -> dict[str, list[str]] | None:
    """Visin's ``--classes-scored a,b --classes-ignored c``.

    Raises:
        UsageError: ignored classes without the scored ones.
    """
    if ignored is not None and scored is None:
        raise UsageError("--classes-ignored needs --classes-scored: say which were scored too")
    if scored is None:
        return None
    split = lambda text: [c.strip() for c in (text or "").split(",") if c.strip()]  # noqa: E731
    return {"scored": split(scored), "ignored": split(ignored)}


def external_evidence(
    results: Mapping[str, Any],
    *,
    checkpoint: Mapping[str, str],
    source: Mapping[str, Any],
    sample_counts: Mapping[str, int] | None = None,
    data: Mapping[str, Any] | None = None,
    protocol: Mapping[str, Any] | None = None,
    evaluator: Mapping[str, Any] | None = None,
    classes: Mapping[str, Any] | None = None,
    supersedes: str | None = None,
) -> dict[str, Any]:
    """The keyword arguments of :func:`build` for results computed elsewhere; ``source`` is kept
    under each condition in ``sources`` (the file it came from)."""
    kept = numbers_only(results)
    return {
        "checkpoint": dict(checkpoint),
        "results": kept,
        "sample_counts": dict(sample_counts or {}),
        "data": dict(data) if data else None,
        "protocol": dict(protocol) if protocol else None,
        # as Visin sends it: an evaluator is evidence only with its package and version
        "evaluator": dict(evaluator)
        if evaluator and evaluator.get("package") and evaluator.get("version") else None,
        "sources": {name: dict(source) for name in kept},
        "classes": classes,
        "supersedes": supersedes,
    }
