"""The user's n-gram LM on the same held-out text, through KenLM's ``query`` (Moses' ``bin/query``).

``query -v summary LM < TEXT`` prints (kenlm/lm/ngram_query.hh, ``PrintSummary``)::

    Perplexity including OOVs:	21.86
    Perplexity excluding OOVs:	21.86
    OOVs:	0
    Tokens:	42

"Excluding OOVs" leaves out the words outside the LM's vocabulary and counts ``</s>``: the
convention of :func:`.trainer.perplexity`'s ``ppl`` when the CSLM's shortlist holds every word of
its training text (as it does when the text has fewer distinct words than the shortlist size).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

from ..errors import HostError

_LINE = re.compile(r"^(Perplexity including OOVs|Perplexity excluding OOVs|OOVs|Tokens):\s*(\S+)", re.M)


class KenLMError(HostError):
    pass


@dataclass(frozen=True)
class KenLMPerplexity:
    ppl_with_oovs: float
    ppl: float
    oovs: int
    tokens: int


def query_perplexity(query: str, lm: str, text: str) -> KenLMPerplexity:
    """Run ``query -v summary lm`` on the lines of ``text`` (one sentence a line, tokenized)."""
    if not os.path.exists(lm):
        raise KenLMError(f"{lm}: no such KenLM model")
    result = subprocess.run([query, "-v", "summary", lm], input=text.encode("utf-8"), capture_output=True)
    out = result.stdout.decode("utf-8", "replace")
    values = dict(_LINE.findall(out))
    if result.returncode != 0 or len(values) != 4:
        detail = (result.stderr.decode("utf-8", "replace").strip().splitlines() or ["no output"])[-1]
        raise KenLMError(f"{query} {lm} failed (exit {result.returncode}): {detail}")
    return KenLMPerplexity(
        float(values["Perplexity including OOVs"]),
        float(values["Perplexity excluding OOVs"]),
        int(values["OOVs"]),
        int(values["Tokens"]),
    )
