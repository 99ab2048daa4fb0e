"""Target phrases proposed by the network for source phrases (the paper's Table 3), as reports.

For each source phrase: the best candidates of beam search and the best distinct ones of a
seeded sample (see :mod:`.search`), each with its log p(target | source) and, when a phrase table
is given, whether the table already pairs it with that source. Phrases are looked up and reported
in the table's form; :func:`format_text` shows them to people through a ``moses.tokenizer.Display``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import torch

from ..data.vocab import Vocabulary
from ..model.architectures import Network
from ..moses.tokenizer import Display
from ..moses.words import split_words
from .search import Candidate, beam_search, default_max_length, sample, top_unique
from .table_groups import normalize, phrase_groups, pick_groups


@dataclass(frozen=True)
class Settings:
    beam_size: int = 10  # 0: no beam search
    samples: int = 50  # 0: no sampling
    temperature: float = 1.0
    top: int = 5  # candidates kept per method
    seed: int = 1  # the sampler is seeded anew for every phrase
    max_length: int | None = None  # None: 2 x source length + 10
    allow_unk: bool = False
    alpha: float = 0.0  # GNMT length normalisation (GNMT: 0.2); 0: rank by log p
    beta: float = 0.0  # GNMT coverage penalty, attention models (GNMT: 0.2); 0: none


@dataclass
class Suggestion:
    target: str
    logp: float  # log p(target </s> | source), the rescoring score of the pair
    truncated: bool  # </s> forced at the length limit
    in_table: bool | None  # None: no table given


@dataclass
class MethodResult:
    method: str  # "beam search" or "sampling"
    detail: str  # e.g. "beam 10", "50 at temperature 1, best 5 of 43 distinct"
    candidates: list[Suggestion]


@dataclass
class SourceSuggestions:
    source: str  # normalised, in the table's form
    unknown_words: int  # source words outside the shortlist
    in_table: bool | None  # the table has the source (None: no table given)
    methods: list[MethodResult]
    typed: str | None = None  # what a person typed, when it differs from ``source``


def table_targets(path: str, phrases: list[str], inverse: bool = False) -> dict[str, set[str]]:
    """The targets a phrase table lists for each of ``phrases`` that it has (normalised); with
    ``inverse`` (an inverse network), the sources it lists for each of ``phrases`` as a target."""
    groups, _ = pick_groups(phrase_groups(path, inverse=inverse), given=phrases)
    return {g.source: set(g.targets) for g in groups}


def suggest(
    model: Network,
    src_vocab: Vocabulary,
    tgt_vocab: Vocabulary,
    phrase: str,
    settings: Settings,
    known: dict[str, set[str]] | None = None,
    typed: str | None = None,
) -> SourceSuggestions:
    """Beam-search and sampled candidates for ``phrase`` (in the table's form); ``known`` from
    :func:`table_targets`; ``typed``: the text it was made from, reported beside it."""
    if settings.beam_size == 0 and settings.samples == 0:
        raise ValueError("nothing to do: no beam search and no sampling")
    tokens = split_words(phrase)
    src_ids = src_vocab.encode(tokens)
    limit = settings.max_length or default_max_length(len(src_ids))
    source = normalize(phrase)
    targets = None if known is None else known.get(source, set())

    def report(cands: list[Candidate]) -> list[Suggestion]:
        out = []
        for c in cands:
            text = " ".join(tgt_vocab.decode(c.tokens))
            out.append(Suggestion(text, c.logp, c.truncated, None if targets is None else text in targets))
        return out

    methods = []
    if settings.beam_size:
        found = beam_search(
            model, src_ids, settings.beam_size, limit, settings.allow_unk, settings.alpha, settings.beta
        )
        methods.append(MethodResult("beam search", f"beam {settings.beam_size}", report(found[: settings.top])))
    if settings.samples:
        generator = torch.Generator(device=next(model.parameters()).device).manual_seed(settings.seed)
        drawn = sample(model, src_ids, settings.samples, settings.temperature, generator, limit, settings.allow_unk)
        best = top_unique(drawn, settings.top)
        detail = (
            f"{settings.samples} at temperature {settings.temperature:g}, "
            f"best {len(best)} of {len({c.tokens for c in drawn})} distinct"
        )
        methods.append(MethodResult("sampling", detail, report(best)))
    return SourceSuggestions(
        source,
        src_vocab.count_unknown(tokens),
        None if known is None else source in known,
        methods,
        typed if typed is not None and normalize(typed) != source else None,
    )


def format_text(results: list[SourceSuggestions], display: Display | None = None) -> str:
    """The report for people: phrases shown through ``display`` (default: unescaped); a typed
    phrase is followed by the table form that was looked up."""
    display = display or Display()
    lines = []
    for r in results:
        notes = []
        if r.typed is not None:
            notes.append(f"looked up as: {r.source}")
        if r.unknown_words:
            notes.append(f"{r.unknown_words} word(s) outside the source vocabulary")
        if r.in_table is False:
            notes.append("source not in the table")
        shown = r.typed if r.typed is not None else display.source(r.source)
        lines.append(shown + (f"    ({'; '.join(notes)})" if notes else ""))
        for m in r.methods:
            lines.append(f"  {m.method} ({m.detail})")
            for c in m.candidates:
                flags = ("  [in table]" if c.in_table else "") + ("  [cut at max length]" if c.truncated else "")
                lines.append(f"    {c.logp:9.3f}  {display.target(c.target)}{flags}")
        lines.append("")
    return "\n".join(lines) + "\n"


TSV_HEADER = ("source", "method", "rank", "logp", "target", "in_table", "truncated")


def tsv_rows(results: list[SourceSuggestions]) -> list[tuple[str, ...]]:
    yes_no = {None: "", True: "yes", False: "no"}
    rows: list[tuple[str, ...]] = []
    for r in results:
        for m in r.methods:
            for k, c in enumerate(m.candidates, 1):
                rows.append(
                    (r.source, m.method, str(k), f"{c.logp:.6f}", c.target, yes_no[c.in_table], yes_no[c.truncated])
                )
    return rows


def to_json(results: list[SourceSuggestions]) -> str:
    return json.dumps([asdict(r) for r in results], ensure_ascii=False, indent=2)
