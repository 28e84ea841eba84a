"""Text-tower outputs, stored: a CLIP text embedding is computed once per backbone and text.

A zero-shot task asks its ``text_encoder`` for batches of texts (prompts filled with class
names, captions). Each batch is a derivation ``text-embeddings(backbone, texts digest)`` whose
output is a ``tensors`` object (safetensors, ``embeddings`` (n, D) float32): a second task, split
or dataset with the same prompts on the same backbone reads it instead of running the text tower,
and a hit never builds the model. A result records an edge (role ``text_embeddings``) to each
object its texts were read from, so ``vbstore why`` shows them and gc keeps them while the result
stays; one no stored result used is a recomputable cache, collected once unused for gc's grace
period unless a ref (``vbstore tag``) pins it.

Each output declares its question in its ``__metadata__`` (``backbone``, ``texts``: the digest
of the texts, ``count``), and a recorded one is read only when that is the question asked (the
gate's check of op ``text-embeddings``): a row pointed at another prompt set's output, or an
output stored before outputs declared their question, is computed again and recorded over.
"""

from __future__ import annotations

from typing import Any

from .. import canonical
from ..records import StoreReader, answer_differences
from ..store import derivation_key, derivation_spec, to_safetensors_bytes

TEXT_OP_VERSION = 1


class StoredTextEncoder:
    """A ``text_encoder`` that reads each batch's embeddings from the store, else computes and
    stores them.

    Attributes:
        computed: Texts the text tower embedded here (0 when every batch was stored).
        used: The ``tensors`` object of each batch, read or written here, in call order (the
            result's ``text_embeddings`` edges).
    """

    def __init__(self, store: Any, backbone: Any) -> None:
        self.store = store
        self.backbone = backbone  # a BackboneRef: built only on a miss
        self.computed = 0
        self.used: list[str] = []

    def __call__(self, texts: list[str]) -> Any:
        # the compute path (torch): a text encoder is only called on a result miss
        import torch
        from safetensors.torch import load as load_tensors

        texts = [str(t) for t in texts]
        spec = derivation_spec("text-embeddings", TEXT_OP_VERSION,
                               {"backbone": self.backbone.id},
                               {"texts": canonical.digest(canonical.dumps(texts)),
                                "count": len(texts)})
        found = self.store.lookup(derivation_key(spec))
        if found is not None and not answer_differences(spec, found, StoreReader(self.store)):
            self.used.append(found)
            return load_tensors(self.store.read_bytes(found, verify=True))["embeddings"]
        out = self.backbone.load().encode_text(texts)
        embeddings = out.detach().to("cpu", torch.float32).contiguous()
        question = {"backbone": self.backbone.id, **spec["params"]}  # what the gate compares
        oid = self.store.put_bytes(
            to_safetensors_bytes({"embeddings": embeddings}, "tensors", question), "tensors")
        self.store.record(spec, oid)
        self.used.append(oid)
        self.computed += len(texts)
        return embeddings
