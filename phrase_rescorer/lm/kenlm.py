"""The user's n-gram LM through KenLM's ``query`` (Moses' ``bin/query``): its perplexity of a
held-out text, and each sentence's log10 p (:class:`KenLMSentences`).

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

import contextlib
import os
import re
import subprocess
import tempfile
import threading
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


#: What KenLM's ``query`` takes for word boundaries besides the space and tab that Moses splits at
#: (util/file_piece.cc, ``kSpaces``: ``\n \v \f \r``): a word holding one would be other words to it.
_QUERY_SPACES = re.compile(r"[\n\v\f\r]")
#: Moses' LM feature: KenLM's log10 p in natural log (moses/Util.h: ``inline float
#: TransformLMScore(float irstScore) { return irstScore * 2.30258509299405f; }``).
LN_10 = 2.30258509299405


class KenLMSentences:
    """log10 p(<s> words </s>) of sentences under an n-gram LM, through a running ``query -b -v
    sentence LM`` (Moses' ``bin/query``), which prints one line per input line
    (kenlm/lm/ngram_query.hh)::

        Total: -18.9548 OOV: 0

    the sum of log10 p of every word and of </s>, <s> before the first word, words outside the
    LM's vocabulary scored as <unk> (as the decoder's KENLM feature scores them). The LM is loaded
    once; :meth:`totals` hands it a batch of sentences at a time (written by a thread while the
    answers are read, ``-b`` answering each line at once). Use as a context manager."""

    def __init__(self, query: str, lm: str) -> None:
        if not os.path.exists(lm):
            raise KenLMError(f"{lm}: no such KenLM model")
        self.query, self.lm = query, lm
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115  (closed by close(), with the process)
        self._process = subprocess.Popen(
            [query, "-b", "-v", "sentence", lm], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._errors
        )

    @staticmethod
    def check(words: list[str]) -> None:
        """ValueError for a word that ``query`` would split (one holding ``\\v``, ``\\f`` or
        ``\\r``): its LM score would be another text's."""
        for word in words:
            odd = _QUERY_SPACES.search(word)
            if odd is not None:
                raise ValueError(
                    f"the word {word[:40]!r} holds U+{ord(odd.group()):04X}, at which KenLM's query splits "
                    "words (Moses does not): its LM score would be another text's"
                )

    def totals(self, sentences: list[list[str]]) -> list[float]:
        """log10 p(<s> words </s>) of each sentence (its words, as Moses splits them; each
        :meth:`check`-ed)."""
        for words in sentences:
            self.check(words)
        data = b"".join(" ".join(words).encode("utf-8") + b"\n" for words in sentences)
        process = self._process
        assert process.stdin is not None and process.stdout is not None

        def write() -> None:
            with contextlib.suppress(OSError):  # query gone: its answers end early, and say why
                process.stdin.write(data)  # type: ignore[union-attr]
                process.stdin.flush()  # type: ignore[union-attr]

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        out: list[float] = []
        try:
            for _ in sentences:
                line = process.stdout.readline()
                match = _TOTAL.match(line)
                if match is None:
                    raise KenLMError(f"{self.query} {self.lm} failed: {self._why(line)}")
                out.append(float(match.group(1)))
        except BaseException:
            process.kill()  # the writer is not left waiting on a full pipe
            raise
        finally:
            writer.join()
        return out

    def _why(self, line: bytes) -> str:
        if line:
            return f"unexpected output {line[:80].decode('utf-8', 'replace')!r}"
        code = self._process.wait()
        self._errors.seek(0)
        detail = self._errors.read().decode("utf-8", "replace").strip().splitlines() or ["no output"]
        return f"exit {code}: {detail[-1]}"

    def close(self) -> None:
        if self._process.stdin is not None:
            with contextlib.suppress(OSError):
                self._process.stdin.close()
        if self._process.poll() is None:
            self._process.terminate()
        self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._errors.close()

    def __enter__(self) -> KenLMSentences:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_TOTAL = re.compile(rb"^Total: (\S+) OOV: \d+\s*$")
