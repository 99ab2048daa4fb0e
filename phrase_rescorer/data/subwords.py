"""Subword units: a SentencePiece model per side, learned on the table's own phrases.

With ``train --subwords N`` every token of a phrase is split into subword units (GNMT's
"wordpieces"; here SentencePiece's BPE), the network reads and predicts units, and a pair
scores as the sum of log p over the target's units plus the end of sequence. The split is
internal: the table's tokens are read and written exactly as they are (Moses-escaped, cased),
and each side's model is stored inside the model file as SentencePiece's own serialized proto.

Why SentencePiece: maintained by Google, a C++ core with wheels for every platform, it learns
and applies a model in one library from Python strings, serializes the model to bytes (so the
model file stays self-contained and ``weights_only``-loadable), and with ``byte_fallback``
splits a character never seen in training into UTF-8 byte units, so **no unit is ever unknown**
(the "WP" feature of a subword model is 0). Hugging Face tokenizers needs a JSON round trip and
pre-tokenizer set-up for the same; subword-nmt is pure Python and has no byte fallback.

Settings: BPE, ``character_coverage`` 1 (every character of the phrases is a unit of its own),
the ``identity`` normalisation (no NFKC: a token is never changed before it is split),
``byte_fallback``, units never across a space. A token is split the same way alone or inside
its phrase, so ``split`` works token by token (with a cache) and a phrase is the concatenation.
The size N is an upper bound (``hard_vocab_limit`` off): a small table may give fewer units.

Room for the characters. Byte fallback takes 256 units and ``<unk>`` one, so N units hold at most
N - 257 characters (43 at the smallest N, 300). Where the phrases have more distinct characters,
the N - 257 most frequent are units and the others are left out of the learning text
(:func:`frequent_characters`); a token is split into units and the byte units of the characters
left out, as of an unseen character, so the split stays exact and no unit is unknown.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
import sentencepiece as spm

from ..errors import UsageError
from ..moses.words import split_words
from .pairs import PairSet
from .vocab import SPECIALS, Vocabulary

#: Phrases beyond this many are sampled by SentencePiece (memory of the learning step).
MAX_LEARN_PHRASES = 2_000_000
#: The units of a model besides its characters and merged units: ``<unk>`` and the 256 bytes.
META_UNITS = 1 + 256
#: SentencePiece's space, put before every word (its ``add_dummy_prefix``) and between words.
SPACE = "\u2581"


class SubwordError(UsageError):
    """Subword units that cannot be learned or loaded; the message says why."""


class Subwords:
    """One side's SentencePiece model: tokens -> units."""

    def __init__(self, proto: bytes):
        self.proto = bytes(proto)
        if not self.proto:  # SentencePiece "loads" it, then fails at the first phrase
            raise SubwordError("an empty SentencePiece model")
        try:
            self.processor = spm.SentencePieceProcessor(model_proto=self.proto)
        except RuntimeError as e:
            raise SubwordError(f"not a SentencePiece model: {e}") from e
        if self.processor.get_piece_size() == 0:
            raise SubwordError("a SentencePiece model without units")
        self._cache: dict[str, list[str]] = {}

    @classmethod
    def learn(cls, phrases: Iterable[str], size: int, threads: int = 2) -> Subwords:
        """A model of at most ``size`` units learned on ``phrases`` (tokens joined by spaces);
        where the characters do not all fit, the rarest are left to byte units (the module's
        "Room for the characters")."""
        out = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(frequent_characters(list(phrases), size - META_UNITS)),
                model_writer=out,
                vocab_size=size,
                model_type="bpe",
                character_coverage=1.0,
                byte_fallback=True,
                normalization_rule_name="identity",
                hard_vocab_limit=False,
                unk_id=0,
                bos_id=-1,
                eos_id=-1,
                pad_id=-1,
                input_sentence_size=MAX_LEARN_PHRASES,
                shuffle_input_sentence=True,
                num_threads=threads,
                minloglevel=2,
            )
        except RuntimeError as e:
            raise SubwordError(
                f"--subwords {size}: SentencePiece could not learn the units: {e} "
                f"(byte fallback needs at least {META_UNITS + 1} units)"
            ) from e
        return cls(out.getvalue())

    @property
    def units(self) -> list[str]:
        """Every unit but SentencePiece's own <unk> (never produced: byte fallback)."""
        p = self.processor
        return [p.id_to_piece(i) for i in range(p.get_piece_size()) if not p.is_unknown(i)]

    def vocabulary(self) -> Vocabulary:
        """The network's vocabulary: the special symbols, then every unit."""
        return Vocabulary(list(SPECIALS) + self.units)

    def split_token(self, token: str) -> list[str]:
        units = self._cache.get(token)
        if units is None:
            units = self._cache[token] = self.processor.encode(token, out_type=str)
        return units

    def split(self, tokens: Sequence[str]) -> list[str]:
        """The units of a phrase's tokens, in order."""
        out: list[str] = []
        for t in tokens:
            out.extend(self.split_token(t))
        return out

    def join(self, units: Sequence[str]) -> list[str]:
        """The tokens that ``units`` spell (the inverse of ``split``)."""
        return split_words(str(self.processor.decode(list(units))))

    def tensor(self) -> np.ndarray:
        return np.frombuffer(self.proto, dtype=np.uint8)


def frequent_characters(phrases: list[str], room: int) -> list[str]:
    """``phrases`` as SentencePiece is to learn from them with ``room`` units for characters:
    unchanged where their distinct characters fit (SentencePiece's space, one before each word,
    counted among them), else with each character but the ``room`` most frequent (the space
    always kept) replaced by a space. SentencePiece would refuse the size instead ("Vocabulary size is smaller than
    required_chars"; a lower ``character_coverage`` does not help, it must be 0.98 at least), and
    a character left out is spelled by its byte units when a token is split, where no unit spans
    it: no unit is learned across it either."""
    counts: Counter[str] = Counter()
    for phrase in phrases:
        counts.update(phrase)
    counts[SPACE] += counts.pop(" ", 0) + len(phrases)
    if len(counts) <= room:
        return phrases
    kept = set(sorted(counts, key=lambda c: (c != SPACE, -counts[c], c))[: max(room, 1)])  # the space first
    left_out = {ord(c): " " for c in counts if c not in kept}
    return [phrase.translate(left_out) for phrase in phrases]


def learn_pair_subwords(pairs: PairSet, size: int) -> tuple[Subwords, Subwords]:
    """A source and a target model of at most ``size`` units each, learned on the distinct
    phrases of each side of ``pairs``."""
    return tuple(  # type: ignore[return-value]
        Subwords.learn(sorted(_phrases(tokens, offsets, types)), size)
        for tokens, offsets, types in (
            (pairs.src_tokens, pairs.src_offsets, pairs.src_types),
            (pairs.tgt_tokens, pairs.tgt_offsets, pairs.tgt_types),
        )
    )


def segment_pairs(pairs: PairSet, src: Subwords, tgt: Subwords) -> PairSet:
    """The same pairs (same hashes, so the same held-out pairs) with every token replaced by its
    units; the type inventories become the units."""
    s_tokens, s_offsets, s_types = _expand(pairs.src_tokens, pairs.src_offsets, pairs.src_types, src)
    t_tokens, t_offsets, t_types = _expand(pairs.tgt_tokens, pairs.tgt_offsets, pairs.tgt_types, tgt)
    return PairSet(
        s_tokens,
        s_offsets,
        t_tokens,
        t_offsets,
        pairs.hashes,
        s_types,
        t_types,
        lines_read=pairs.lines_read,
        duplicates=pairs.duplicates,
    )


def _phrases(tokens: np.ndarray, offsets: np.ndarray, types: list[str]) -> set[str]:
    return {" ".join(types[j] for j in tokens[offsets[i] : offsets[i + 1]]) for i in range(len(offsets) - 1)}


def _expand(
    tokens: np.ndarray, offsets: np.ndarray, types: list[str], model: Subwords
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Token ids -> unit ids through each type's units (every type split once)."""
    units = model.units
    unit_id = {u: i for i, u in enumerate(units)}
    per_type = [[unit_id[u] for u in model.split_token(t)] for t in types]
    type_len = np.array([len(p) for p in per_type], dtype=np.int64)
    flat = np.array([u for p in per_type for u in p], dtype=np.int32)
    type_start = np.concatenate([[0], np.cumsum(type_len)[:-1]]).astype(np.int64)
    lengths = type_len[tokens]  # units of each token
    starts = np.repeat(type_start[tokens], lengths)
    within = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    new_tokens = flat[starts + within]
    token_end = np.concatenate([[0], np.cumsum(lengths)])
    return new_tokens, token_end[offsets], units
