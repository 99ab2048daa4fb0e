"""Moses' own features of hypotheses it did not list, by constrained decoding.

A hypothesis another system proposed (a network's candidate) has no derivation in Moses' n-best
list: its phrase pairs, reordering and phrase count are unknown. Moses can find them itself: its
``ConstrainedDecoding`` feature, added on the command line (``-feature-add``: "Add a feature
function on the command line", moses/Parameter.cpp), lets through only the hypotheses whose words
are the constraint's (a hypothesis that cannot become it scores minus infinity and is discarded).
The feature is not tuneable and is not written into n-best lists, so the line of a constrained
sentence has exactly the features of an ordinary one, with the values of the best derivation of
that hypothesis the moses.ini's model can find (the tests check both with the real Moses).

A word Moses copies from the source (one no phrase pair translates) never equals the constraint's
word in its matching, which counts it as an unknown instead, accepted where the constraint has any
word, up to the feature's ``max-unknowns`` (default 0: no hypothesis with a copied word would be
reached). The limit is set high, and the decoder's hypothesis is kept only where its words are the
constraint's: the copied word can only be itself, so a derivation is kept only if it writes exactly
the hypothesis.

Each hypothesis is decoded on its own (its source sentence once per hypothesis, the hypothesis
the one constraint of that input line), so that the derivations of different hypotheses never
compete for a stack. A hypothesis the decoder writes no line for is *unreached* (None), and never
gets a made-up score: the model cannot produce it (a word that no phrase pair and no copied unknown
word yields, an order beyond the distortion limit). Measured on 100 en→de dev sentences (the
bundled system, a text phrase table): 0.033 s of CPU a hypothesis after the tables' load (13 s);
all sentences' hypotheses as constraints of one input line each (Moses takes ``ID<tab>words``
lines) took 0.16 s a sentence of 9 hypotheses, but lost 38 of 895 to the stacks' pruning.

One decoder process decodes a batch of hypotheses: the moses.ini's tables are loaded once per
call of :meth:`ConstrainedDecoder.lines`. Before it, :mod:`.reachable` leaves out the hypotheses
that no derivation of the ini's phrase tables writes, told without decoding (unreached, as the
decoder would find them; ``check=False`` decodes every one): 60-67 % of the networks' new
candidates on the bundled systems. Where it leaves out every one, the first is decoded still, so
that the decoder reads the ini and its errors are raised as without the check.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable, Sequence

from .decoder import DecoderError, decoder_argv, log_tail
from .nbest import NbestLine, parse_nbest_line
from .reachable import reach_check
from .toolkit import MosesToolkit

#: Moses' name of the feature.
FEATURE = "ConstrainedDecoding"
#: Its ``max-unknowns``: how many copied unknown words a match may hold (module docstring).
MAX_UNKNOWNS = 1000


def decodable(words: list[str]) -> bool:
    """Whether a hypothesis can be a constraint: not empty (Moses refuses an empty constraint
    line: ``Reference file not loaded``) and without ``|``, Moses' factor separator (its tokenizer
    writes ``&#124;`` for the character, so a word holding it is none Moses writes)."""
    return bool(words) and not any("|" in word for word in words)


class ConstrainedDecoder:
    """The best derivations, under the moses.ini ``ini``, of hypotheses of the sentences
    ``sources`` (the text Moses translated, one sentence a line), found by Moses' decoder of
    ``toolkit`` (module docstring)."""

    def __init__(
        self,
        toolkit: MosesToolkit,
        ini: str,
        sources: Sequence[str],
        *,
        threads: int = 1,
        on_progress: Callable[[str], None] | None = None,
        check: bool = True,
    ) -> None:
        self.toolkit = toolkit
        self.ini = ini
        self.sources = sources
        self.threads = threads
        self.on_progress = on_progress
        self.check = check

    def lines(self, hypotheses: Sequence[tuple[int, list[str]]]) -> list[NbestLine | None]:
        """For each (sentence ID, words), Moses' n-best line of its best derivation (its sentence
        ID that of the input line the decoder was given: use its features and total only), or
        None where the model cannot produce it. A sentence ID beyond ``sources`` raises
        ValueError; a decoder that fails, :class:`.decoder.DecoderError`."""
        for sentence, _ in hypotheses:
            if not 0 <= sentence < len(self.sources):
                raise ValueError(
                    f"sentence ID {sentence}, but the source text has {len(self.sources):,} sentences: "
                    "give the text the list translates"
                )
        wanted = [i for i, (_, words) in enumerate(hypotheses) if decodable(words)]
        found: list[NbestLine | None] = [None] * len(hypotheses)
        check = reach_check(self.ini, self.sources, (hypotheses[i] for i in wanted)) if self.check and wanted else None
        unwritable = 0
        if check is not None:
            # at least one decoded, so that the decoder reads the ini as before (its errors raised)
            possible = [i for i in wanted if check.possible(*hypotheses[i])] or wanted[:1]
            unwritable, wanted = len(wanted) - len(possible), possible
        if not wanted:
            return found
        with tempfile.TemporaryDirectory(prefix="phrase-rescorer-constrained-") as work:
            if any(c.isspace() for c in work):
                raise DecoderError(f"the temporary directory {work!r} holds a space, which Moses' feature line splits")
            source, constraints = os.path.join(work, "source"), os.path.join(work, "constraints")
            nbest, log = os.path.join(work, "nbest"), os.path.join(work, "log")
            with open(source, "w", encoding="utf-8") as s, open(constraints, "w", encoding="utf-8") as c:
                for i in wanted:  # input line k: the hypothesis' sentence, constrained to it
                    sentence, words = hypotheses[i]
                    s.write(self.sources[sentence] + "\n")
                    c.write(" ".join(words) + "\n")
            if self.on_progress is not None:
                left = (
                    f" ({unwritable:,} more that no derivation of its phrase tables writes left out)"
                    if unwritable
                    else ""
                )
                self.on_progress(f"constrained decoding: {len(wanted):,} hypotheses with {self.ini}{left}")
            argv = decoder_argv(self.toolkit, self.ini, source, self.threads)
            feature = f"{FEATURE} path={constraints} max-unknowns={MAX_UNKNOWNS}"
            argv += ["-n-best-list", nbest, "1", "-feature-add", feature]
            with open(log, "wb") as err:
                result = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
            if result.returncode != 0 or not os.path.isfile(nbest):
                raise DecoderError(
                    f"moses failed (exit {result.returncode}) decoding hypotheses constrained, with "
                    f"{self.ini}:\n{log_tail(log)}"
                )
            for line in _lines(nbest):
                i = wanted[line.sentence]
                if line.tokens == hypotheses[i][1]:  # Moses wrote the constraint: never another hypothesis
                    found[i] = line
        return found


def _lines(path: str) -> list[NbestLine]:
    """The lines of the decoder's 1-best list, where an unreached input line has none (so that
    ``read_nbest``, which wants every sentence, does not apply)."""
    with open(path, "rb") as f:
        return [
            parse_nbest_line(raw.rstrip(b"\r\n"), b"\n", number, path)
            for number, raw in enumerate(f, start=1)
            if raw.strip()
        ]
