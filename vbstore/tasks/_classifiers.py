"""CLIP_benchmark's saved zero-shot classifiers: ``--save_clf`` and ``--load_clfs``.

CLIP_benchmark 1.6.2 (``clip_benchmark/metrics/zeroshot_classification.py``, ``evaluate``):

- the classifier is the text tower's class-embedding matrix, shape ``(D, C)`` (embedding
  dimension by classes: ``torch.stack(class_embeddings, dim=1)``), each column the normalised
  mean of a class's normalised prompt embeddings;
- ``--save_clf FILE`` writes it with ``torch.save(classifier, FILE)``: a pickled tensor, nothing
  around it;
- ``--load_clfs A B ...`` reads each with ``torch.load(path, map_location="cpu")`` and uses
  their average, summed in order as ``A / n + B / n + ...`` and not normalised again, instead
  of running the text tower; the image features (normalised) are scored against it as they are.

Here a loaded file is an input of the result: ``load`` reads the files (``weights_only``: a
tensor and nothing that runs code), checks each is a finite floating ``(D, C)`` matrix of one
shape, and turns them into a ``tensors`` object (``0``, ``1``... in the order given, dtypes
kept) whose id replaces the paths in the task parameters, so the result follows the tensors'
content, not the files' names. The scored side checks ``D`` against the image embedding and
``C`` against the data's classes before anything is computed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError

if TYPE_CHECKING:
    import torch

# Local imports: torch, safetensors and the store's serialiser load inside the functions that
# read or score classifiers; declaring the parameter (importing a task) loads none of them.

HINT = ("a file CLIP_benchmark's --save_clf (or vbstore's --save-clf) wrote: one (D, C) "
        "tensor, D the model's embedding size, C the classes")


def paths(value: str) -> list[str]:
    """The files a ``load_clfs`` value names: comma-separated, blanks dropped."""
    return [part.strip() for part in value.split(",") if part.strip()]


def _read(path: str) -> torch.Tensor:
    import torch

    try:
        value = torch.load(Path(path).expanduser(), map_location="cpu", weights_only=True)
    except OSError as exc:
        raise UsageError(f"load_clfs {path!r}: {exc.strerror or exc}", hint=HINT) from None
    except Exception as exc:  # torch.load on foreign bytes raises anything
        # (UnpicklingError, BadZipFile, RuntimeError, EOFError, KeyError...): all one refusal
        raise UsageError(f"load_clfs {path!r} is not a tensor file torch.save wrote (torch.load "
                         f"refused it: {type(exc).__name__})", hint=HINT) from None
    if not isinstance(value, torch.Tensor):
        raise UsageError(f"load_clfs {path!r} holds a {type(value).__name__}, not a tensor",
                         hint=HINT)
    if value.ndim != 2 or not value.is_floating_point() or 0 in value.shape:
        raise UsageError(f"load_clfs {path!r} holds a {value.dtype} tensor of shape "
                         f"{tuple(value.shape)}, not a (D, C) matrix of floats", hint=HINT)
    if not torch.isfinite(value).all():
        raise UsageError(f"load_clfs {path!r} holds NaN or Inf", hint=HINT)
    return value.detach().contiguous()


def load(value: str) -> bytes:
    """The classifiers ``value`` names as the bytes of one ``tensors`` object.

    Raises:
        UsageError: a file that cannot be read, is not a finite (D, C) float tensor, or whose
            shape differs from the first file's.
    """
    from ..store import to_safetensors_bytes  # the plan of a request that names files only

    files = paths(value)
    if not files:
        raise UsageError(f"load_clfs {value!r} names no file", hint=HINT)
    tensors: dict[str, Any] = {}
    for i, path in enumerate(files):
        tensor = _read(path)
        if tensors and tensor.shape != tensors["0"].shape:
            raise UsageError(f"load_clfs {path!r} has shape {tuple(tensor.shape)} but "
                             f"{files[0]!r} has {tuple(tensors['0'].shape)}: they cannot be "
                             "averaged", hint="load classifiers of one model and one dataset")
        tensors[str(i)] = tensor
    return to_safetensors_bytes(tensors, "tensors", {"load_clfs": str(len(files))})


def entries(data: bytes) -> list[Any]:
    """The stored classifiers, in the order given (the compute path: torch)."""
    from safetensors.torch import load as load_tensors

    tensors = load_tensors(data)
    return [tensors[str(i)] for i in range(len(tensors))]


def shape_of(header: dict[str, Any]) -> tuple[int, int]:
    """``(D, C)`` of a stored classifier object, from its safetensors header (torch-free)."""
    d, c = header["0"]["shape"]
    return int(d), int(c)


def average(classifiers: list[Any]) -> torch.Tensor:
    """CLIP_benchmark's average: ``A / n + B / n + ...`` in the files' dtype, in order."""
    n = len(classifiers)
    out = classifiers[0] / n
    for tensor in classifiers[1:]:
        out = out + tensor / n
    return out


def check_shape(d: int, c: int, dim: int | None, classes: int) -> None:
    """Refuse a ``(d, c)`` classifier for image embeddings of ``dim`` (None: not known yet)
    and ``classes`` classes.

    Raises:
        UsageError: naming both sizes.
    """
    if dim is not None and d != dim:
        raise UsageError(f"load_clfs: the classifier is ({d}, {c}), made for {d}-dim "
                         f"embeddings, but this backbone's image embeddings have {dim}",
                         hint="load a classifier saved with the same CLIP model")
    if c != classes:
        raise UsageError(f"load_clfs: the classifier is ({d}, {c}), {c} classes, but the data "
                         f"has {classes}", hint="load a classifier saved on the same dataset "
                                                "(its classes in the data's order)")
