"""Captioning: the model writes a caption for each image, scored as CLIP_benchmark scores it.

CLIP_benchmark's ``captioning`` (``clip_benchmark/metrics/captioning.py``, MIT) asks the model
for ``model.generate(images)``, decodes each row with open_clip's tokenizer (the text before
``<end_of_text>``, without ``<start_of_text>``, stripped) and scores the captions against each
image's references with pycocoevalcap (the COCO caption evaluation, BSD-2): both sides
tokenized by the PTB tokenizer, then ``Bleu(4)`` (Bleu_1..Bleu_4), METEOR, ROUGE_L, CIDEr and
SPICE, corpus scores as pycocoevalcap returns them.

The engine generates (``generate`` shape) and stores the captions once per backbone, data and
decoding settings; this module only scores them. PTBTokenizer, METEOR and SPICE run Java
(``java`` on PATH); SPICE also needs Stanford CoreNLP's jars, which pycocoevalcap downloads on
first use: without them a run refuses before generating, naming the download or
``spice=false`` (SPICE then absent from the record, which says so).

Data: images with reference captions, as zero-shot retrieval reads them (a list with a
``captions`` column, or a ``cb:`` caption dataset). The task has no ``language`` parameter:
``--language`` reaches it only through ``cb:`` data, whose manifest holds the captions of that
language (CLIP_benchmark's export reads the language there); on other data it is refused.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..errors import MissingDependency, MissingTool, UsageError, field_ref
from ._base import Metric, Param
from ._registry import register_task
from ._shape_generate import GenerateTask

# Local imports: pycocoevalcap loads where captions are scored (a cached result never does).

BLEU = tuple(f"Bleu_{n}" for n in range(1, 5))
# open_clip's CoCa.generate defaults: what CLIP_benchmark's model.generate(images) decodes with
DECODING = MappingProxyType({
    "generation_type": Param("beam_search", "decoding: beam_search (CoCa's default), top_k or "
                             "top_p sampling", choices=("beam_search", "top_k", "top_p")),
    "seq_len": Param(30, "longest caption, in tokens (with <start_of_text>)", minimum=2),
    "min_seq_len": Param(5, "shortest caption, in tokens", minimum=0),
    "num_beams": Param(6, "beams of beam_search", minimum=1),
    "num_beam_groups": Param(3, "beam groups of beam_search (diverse beam search)", minimum=1),
    "repetition_penalty": Param(1.0, "penalty on repeated tokens (1: none)", above=0.0),
    "temperature": Param(1.0, "softmax temperature of top_k/top_p sampling", above=0.0),
    "top_k": Param(1, "tokens kept by top_k sampling", minimum=1),
    "top_p": Param(0.1, "probability mass kept by top_p sampling", above=0.0, maximum=1.0),
})
SPICE_JARS = ("stanford-corenlp-3.6.0.jar", "stanford-corenlp-3.6.0-models.jar")
SPICE_FETCH = "python -m pycocoevalcap.spice.get_stanford_models"


def _pycocoevalcap() -> Path:
    """The installed pycocoevalcap package's folder.

    Raises:
        MissingDependency: pycocoevalcap is not installed.
    """
    # a namespace package (no __init__.py): its folder comes from the import system
    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependency("pycocoevalcap", "captioning")
    return Path(next(iter(spec.submodule_search_locations)))


def spice_ready() -> bool:
    """Whether SPICE's CoreNLP jars are where pycocoevalcap looks for them."""
    lib = _pycocoevalcap() / "spice" / "lib"
    return all((lib / jar).is_file() for jar in SPICE_JARS)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Hold what child processes write to stderr; give it back only when scoring fails."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            held.seek(0)
            sys.stderr.write(held.read().decode(errors="replace")[-2000:])
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def coco_scores(generated: list[str], references: list[list[str]], spice: bool
                ) -> dict[str, float]:
    """pycocoevalcap's corpus scores, as CLIP_benchmark's ``COCOEvalCap`` computes them: image
    i (in order) has ``generated[i]`` and ``references[i]``; SPICE only when ``spice``."""
    _pycocoevalcap()
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.meteor.meteor import Meteor
    from pycocoevalcap.rouge.rouge import Rouge
    from pycocoevalcap.spice.spice import Spice
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    gts = {i: [{"caption": r} for r in refs] for i, refs in enumerate(references)}
    res = {i: [{"caption": g}] for i, g in enumerate(generated)}
    scores: dict[str, float] = {}
    # the scorers print their progress (Bleu its ratios, the Java tokenizer its speed on the
    # inherited stderr): a library keeps both clean
    with _quiet_stderr(), contextlib.redirect_stdout(io.StringIO()):
        tokenizer = PTBTokenizer()
        gts_t, res_t = tokenizer.tokenize(gts), tokenizer.tokenize(res)
        bleu, _ = Bleu(4).compute_score(gts_t, res_t)
        scores.update(zip(BLEU, (float(b) for b in bleu), strict=True))
        scorers: list[tuple[str, Any]] = [("METEOR", Meteor), ("ROUGE_L", Rouge),
                                          ("CIDEr", Cider)]
        if spice:
            scorers.append(("SPICE", Spice))
        for name, scorer in scorers:
            score, _ = scorer().compute_score(gts_t, res_t)
            scores[name] = float(score)
    return scores


@register_task(name="captioning")
class Captioning(GenerateTask):
    """Captions the model generates (CoCa), scored by pycocoevalcap: Bleu, METEOR, CIDEr..."""

    level = "high"
    op_version = 1
    target_kind = "captions"
    shape = "generate"
    stochastic = False
    protocol = "clip_benchmark_captioning"
    layout = "images with reference captions (a .csv/.jsonl list with a captions column)"
    # no language: the scorers read the captions as they are, so a language changes a number
    # only by choosing which captions cb: data holds (--language, cb:NAME@LANG: the manifest)
    params = MappingProxyType({
        "spice": Param(True, "compute SPICE (needs Stanford CoreNLP's jars; false: leave it "
                       "out, the record says so)"),
        **DECODING,
    })
    metrics = (
        *(Metric(name, "higher", f"BLEU-{name[-1]}: {name[-1]}-gram precision, brevity "
                 "penalised") for name in BLEU),
        Metric("METEOR", "higher", "unigram F-mean with stems and synonyms"),
        Metric("ROUGE_L", "higher", "longest common subsequence F-measure"),
        Metric("CIDEr", "higher", "TF-IDF weighted n-gram consensus (CIDEr-D)"),
        Metric("SPICE", "higher", "F-score over scene-graph tuples"),
    )
    headline = "CIDEr"

    def metrics_for(self, params: Any = None) -> tuple[Metric, ...]:
        # spice=false: SPICE is not computed, so no suite, listing or check asks for it
        return tuple(m for m in self.metrics
                     if (params or {}).get("spice", True) or m.name != "SPICE")

    def check_data(self, params: dict[str, Any], given: dict[str, Any], data: Any) -> list[str]:
        """Refuse a caption shorter at most than it must be long; a run without SPICE says so
        in its record (vbstore.engine._datachecks)."""
        if params["seq_len"] <= params["min_seq_len"]:
            raise UsageError(f"seq_len={params['seq_len']} must be above min_seq_len="
                             f"{params['min_seq_len']} (open_clip's generate refuses it)",
                             hint="raise seq_len or lower min_seq_len")
        if params["spice"]:
            return []
        return ["SPICE not computed (spice=false): the record holds Bleu_1..4, METEOR, ROUGE_L "
                "and CIDEr"]

    def uses_seed(self, params: Any) -> bool:
        return params["generation_type"] != "beam_search"  # sampling draws from the seed

    def decoding(self, params: Any, seed: int = 0) -> dict[str, Any]:
        settings = {key: params[key] for key in DECODING}
        # beam search is deterministic: every seed reads the same captions
        return {**settings, "seed": seed} if self.uses_seed(params) else settings

    def check_tools(self, params: Any) -> None:
        """Refuse before generating: no pycocoevalcap, no ``java``, or SPICE without its jars.

        Raises:
            MissingDependency: pycocoevalcap is not installed.
            MissingTool: java is not on PATH, or SPICE's jars are missing.
        """
        folder = _pycocoevalcap()
        if shutil.which("java") is None:
            raise MissingTool("captioning scores with pycocoevalcap, whose tokenizer and METEOR "
                              "run Java, and no `java` is on PATH",
                              hint="install a Java runtime (e.g. apt-get install "
                                   "default-jre-headless) and run again")
        if params.get("spice", True) and not spice_ready():
            raise MissingTool(f"SPICE needs Stanford CoreNLP's jars in {folder / 'spice' / 'lib'}"
                              " (pycocoevalcap downloads them on first use)",
                              hint=f"fetch them once online with `{SPICE_FETCH}`, or pass "
                                   f"{field_ref('param:spice', 'false')} to score without SPICE")

    def _evaluate_captions(self, generated: list[str], references: list[list[str]],
                           params: dict[str, Any]) -> dict[str, float]:
        return coco_scores(generated, references, bool(params["spice"]))
