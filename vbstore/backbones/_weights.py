"""What weights a backbone gets, how they are read, and how they are identified.

Identity is the canonical tensor hash of the state dict as read from its source (after removing
a training wrapper such as ``{"state_dict": ...}`` or a ``module.`` prefix; names sorted, dtype,
shape and C-order bytes, so strides do not matter), so the same tensors saved as ``.pth`` and
``.safetensors`` are the same weights, and any change to any tensor is new weights. A checkpoint's
weights record holds no file name, so the two files are one weights artifact too. What still
differs, by design: a different dtype (a float16 export of float32 weights is other weights),
and a file that drops tied tensors (``safetensors.torch.save_model`` keeps one name of each
shared pair; the architecture then refuses the missing name). Checkpoints are read with
``torch.load(weights_only=True)`` or safetensors: never arbitrary pickles.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blake3

from ..errors import UsageError, field_ref
from ..records import WeightsRecord
from ._errors import CheckpointError, CheckpointNotFound, InvalidSpec

# Local imports: torch and safetensors load when weights are read or initialised; naming a weights
# choice stays torch-free.

TORCH_SUFFIXES = (".pth", ".pt", ".bin", ".ckpt")
CHECKPOINT_SUFFIXES = (*TORCH_SUFFIXES, ".safetensors")
_DIGESTS: dict[tuple[str, int, int, int], str] = {}
_WRAPPER_KEYS = ("state_dict", "model", "model_state", "model_state_dict", "module", "net")


@dataclass(frozen=True)
class WeightsChoice:
    """The user's weights argument, classified.

    Attributes:
        kind: ``pretrained`` (pinned default or a tag), ``checkpoint`` or ``random``.
        tag: the pretrained tag, if one was named.
        path: the checkpoint file, for ``checkpoint``.
        seed: the init seed, for ``random`` (0 unless given).
    """

    kind: str
    tag: str | None = None
    path: Path | None = None
    seed: int | None = None


def check_seed(weights: str | os.PathLike[str], seed: int | None) -> None:
    """Refuse an init seed given with weights other than ``random``: it would change nothing.

    ``seed=None`` means "not given" (``random`` then draws with seed 0): a default never trips it.

    Raises:
        UsageError: a seed with pretrained weights, a tag or a checkpoint.
    """
    text = os.fspath(weights)
    if seed is not None and text != "random":
        raise UsageError(
            f"{field_ref('backbone_seed')} only applies with {field_ref('weights', 'random')}, not "
            f"{field_ref('weights', text)}",
            hint=f"drop {field_ref('backbone_seed')} (backbone_seed= in Python), or use "
                 f"{field_ref('weights', 'random')}",
        )


def parse_weights(
    weights: str | os.PathLike[str],
    *,
    seed: int | None = None,
    tag: str | None = None,
    spec: str = "",
) -> WeightsChoice:
    """Classify a weights argument: ``"default"``, ``"random"``, a tag, or a checkpoint path.

    A value is a path when it is path-like, contains a path separator, or ends in a checkpoint
    suffix; otherwise it is a pretrained tag. ``seed`` is for ``random`` only.

    Raises:
        UsageError: a seed with weights other than ``random`` (see :func:`check_seed`).
        InvalidSpec: a tag given twice with different values, or an unsupported file type.
        CheckpointNotFound: the path does not exist.
    """
    check_seed(weights, seed)
    text = os.fspath(weights)
    is_path = (
        isinstance(weights, os.PathLike)
        or os.sep in text
        or "/" in text
        or text.endswith((*CHECKPOINT_SUFFIXES, ".npz", ".onnx", ".h5"))
    )
    if text == "random":
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
            raise InvalidSpec(spec, f"seed must be a non-negative integer, not {seed!r}")
        return WeightsChoice("random", seed=0 if seed is None else seed)
    if is_path:
        path = Path(text).expanduser()
        if path.is_dir():
            found = sorted(p.name for p in path.iterdir() if p.suffix in CHECKPOINT_SUFFIXES)
            raise InvalidSpec(
                spec, f"weights {text} is a folder, not a checkpoint file",
                hint=(f"name the file in it: {', '.join(found[:3])}" if found else
                      f"name a checkpoint file ({', '.join(CHECKPOINT_SUFFIXES)}); a Hub "
                      "snapshot folder's weights are a file inside it"))
        if path.suffix not in CHECKPOINT_SUFFIXES:
            raise InvalidSpec(
                spec,
                f"unsupported checkpoint type {path.suffix!r}",
                hint=f"convert it to one of {', '.join(CHECKPOINT_SUFFIXES)}",
            )
        if not path.is_file():
            raise CheckpointNotFound(str(path))
        return WeightsChoice("checkpoint", path=path.resolve())
    if text in ("default", "pretrained"):
        return WeightsChoice("pretrained", tag=tag)
    if tag is not None and tag != text:
        raise InvalidSpec(
            spec, f"two tags given: @{tag} and weights={text!r}", hint="give the tag once"
        )
    return WeightsChoice("pretrained", tag=text)


def file_digest(path: str | os.PathLike[str]) -> str:
    """BLAKE3 of a file's bytes: what stands for a checkpoint in a spec's alias key.

    Remembered per process under the file's (path, inode, size, mtime), since a spec is often
    resolved and then built, and checkpoints are large.
    """
    stat = os.stat(path)
    key = (os.path.realpath(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if key in _DIGESTS:
        return _DIGESTS[key]
    hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)
    try:
        hasher.update_mmap(os.fspath(path))
    except (AttributeError, ValueError):  # very old blake3, or an empty file mmap refuses
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 22), b""):
                hasher.update(chunk)
    _DIGESTS[key] = hasher.hexdigest()
    return _DIGESTS[key]


def _is_tensor_map(value: Any) -> bool:
    import torch

    return (
        isinstance(value, Mapping)
        and bool(value)
        and all(isinstance(v, torch.Tensor) for v in value.values())
    )


def read_state_dict(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a checkpoint's tensors, unwrapping common training wrappers.

    Raises:
        CheckpointNotFound: the file does not exist.
        CheckpointError: the file is not a weights-only checkpoint or holds no state dict.
    """
    import torch

    path = Path(path)
    if not path.is_file():
        raise CheckpointNotFound(str(path))
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            obj: Any = load_file(str(path))
        else:
            obj = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(
            str(path),
            f"cannot be read as weights only ({type(exc).__name__}: {str(exc)[:200]})",
            hint="vbstore never unpickles code: save a plain state_dict or a .safetensors file",
        ) from exc
    for _ in range(3):  # {"model": {"state_dict": ...}} happens; deeper nesting does not
        if _is_tensor_map(obj) or not isinstance(obj, Mapping):
            break
        inner = next((obj[k] for k in _WRAPPER_KEYS if isinstance(obj.get(k), Mapping)), None)
        if inner is None:
            break
        obj = inner
    if not _is_tensor_map(obj):
        raise CheckpointError(
            str(path),
            "holds no state dict (a mapping of names to tensors)",
            hint="save model.state_dict() (or wrap it as {'state_dict': ...})",
        )
    state = dict(obj)
    if all(k.startswith("module.") for k in state):  # saved from DataParallel/DDP
        state = {k[len("module.") :]: v for k, v in state.items()}
    return state


def load_strict(
    module: Any, state: Mapping[str, Any], *, where: str, ignorable: tuple[str, ...] = ()
) -> None:
    """Load ``state`` into ``module``, refusing any mismatch outside ``ignorable`` prefixes.

    Classifier heads are the usual ``ignorable``: features never pass through them, so a
    checkpoint fine-tuned for 10 classes still loads into a 1000-class architecture.

    Raises:
        CheckpointError: a missing, unexpected or mis-shaped tensor that features depend on.
    """
    own = module.state_dict()
    state = dict(state)
    for key in [k for k in state if k.startswith(ignorable) and ignorable]:
        if key not in own or tuple(own[key].shape) != tuple(state[key].shape):
            del state[key]
    wrong = [k for k in state if k in own and tuple(own[k].shape) != tuple(state[k].shape)]
    missing = [k for k in own if k not in state and not (ignorable and k.startswith(ignorable))]
    unexpected = [k for k in state if k not in own]
    if wrong or missing or unexpected:
        parts = []
        for label, keys in (
            ("missing", missing),
            ("unexpected", unexpected),
            ("wrong shape", wrong),
        ):
            if keys:
                parts.append(
                    f"{len(keys)} {label} ({', '.join(keys[:4])}{', ...' if len(keys) > 4 else ''})"
                )
        raise CheckpointError(
            where,
            f"does not fit the architecture: {'; '.join(parts)}",
            hint="check that the spec names the architecture the checkpoint was trained with",
        )
    module.load_state_dict(state, strict=False)


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run a block under ``torch.manual_seed(seed)`` without disturbing the caller's RNG."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def weights_record(
    choice: WeightsChoice,
    tensor_hash: str,
    *,
    upstream: str | None = None,
    revision: str | None = None,
    default_origin: str = "pretrained",
) -> WeightsRecord:
    """The record for ``choice`` once its tensors have been hashed.

    ``default_origin`` is what default (or tagged) weights are: ``pretrained``, or ``fixed`` for a
    plugin whose default weights are set by construction (nothing learned or downloaded).
    """
    if choice.kind == "random":
        return WeightsRecord.identify(tensor_hash, "random", seed=choice.seed)
    if choice.kind == "checkpoint":
        # no file name: the same tensors saved as last.pth and export.safetensors are one
        # weights artifact, hence one backbone and one set of features (the file's own hash
        # stays in the backbone alias, so a changed file is never served from the alias)
        return WeightsRecord.identify(tensor_hash, "checkpoint")
    return WeightsRecord.identify(tensor_hash, default_origin, upstream=upstream,
                                   revision=revision)
