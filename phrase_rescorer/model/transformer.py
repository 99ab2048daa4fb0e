"""The Transformer encoder-decoder (Vaswani et al. 2017) behind ``network.Network``: the small,
heavily regularised network that the Multi30k literature trains on 29,000 sentence pairs
(4 layers, width 128, 4 heads, feed-forward 256; ``docs/architectures.md``).

Sizes: the model width d is ``ModelConfig.embed_dim`` (the embeddings, every layer's input and
output), the feed-forward width F is ``hidden_dim``; ``ArchConfig.layers`` layers a side,
``ArchConfig.heads`` heads (d divisible by them). ``maxout_dim`` and ``output_rank`` are not used.

Layers are pre-norm (the layer norm before each sub-layer, Wang et al. 2019 / fairseq's
``--*-normalize-before``: it trains without a learning-rate warm-up)::

    x_0  = dropout_e(sqrt(d) e(w_j) + PE(j))                   sinusoidal positions PE, from 0
    x   += dropout(SelfAttention(LN(x)))                       encoder: every real source position
    x   += dropout(FFN(LN(x)))                                 FFN(x) = W_2 relu(W_1 x + b_1) + b_2
    memory = LN(x_L)

    y_0  = dropout_e(sqrt(d) e(y_{i-1}) + PE(i-1))             e(y_0) = 0: no begin symbol, as cho2014
    y   += dropout(SelfAttention(LN(y)))                       decoder: positions 1 .. i only
    y   += dropout(CrossAttention(LN(y), memory))              keys and values W_k memory, W_v memory
    y   += dropout(FFN(LN(y)))
    p(y_i | y_<i, x) = softmax(E_y LN(y_L) + b)                the output matrix is the target embedding

Attention is scaled dot-product attention over ``heads`` heads of d / heads units, padding
excluded: ``attend`` computes it with its weights, ``attend_values`` through torch's fused kernel
wherever the weights are not read (the same values within float rounding). Dropout
(``ArchConfig.dropout``, ``embed_dropout``) acts in training mode only, on the embeddings with
their positions and on every sub-layer's output before the residual sum.

The interface: ``encode`` gives a ``TransformerEncoded`` (the memory, each decoder layer's
cross-attention keys and values, the mask); ``step`` runs one position through every decoder
layer. Its **state grows by one position a step**: the self-attention keys and values of every
layer at every position so far, flattened to (B, i L 2d) after step i (``start`` gives (B, 0)).
A state depends only on the source and y_1 .. y_i, as every network's must, so the prefix
scorer shares it over common target prefixes and the beam search reorders its rows.
``decode_outputs`` computes all positions of a target at once under a causal mask, the same
arithmetic as the steps (tests hold the two to 1e-5). ``step`` gives as context the top layer's
cross-attention output and as attention weights that layer's, averaged over the heads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from .arch_options import ArchConfig
from .cho2014 import ModelConfig
from .encoders import dropout

#: The sizes of ``ModelConfig`` the transformer does not read (it has no maxout readout and its
#: output matrix is the target embedding).
UNUSED_SIZES = ("maxout_dim", "output_rank")


def size_problem(embed_dim: int, arch: ArchConfig) -> str | None:
    """Why sizes cannot make this Transformer (None where they can)."""
    if embed_dim % arch.heads:
        return f"the transformer's width (--embed-dim {embed_dim}) must be divisible by its --heads {arch.heads}"
    return None


def positions(first: int, count: int, dim: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """Sinusoidal position encodings of positions first .. first+count-1 (count, dim)::

    PE(p, 2k) = sin(p / 10000^(2k/dim)),  PE(p, 2k+1) = cos(p / 10000^(2k/dim))"""
    p = torch.arange(first, first + count, device=device, dtype=torch.float32).unsqueeze(1)
    rate = torch.exp(torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / dim))
    pe = torch.zeros(count, dim, device=device)
    pe[:, 0::2] = torch.sin(p * rate)
    pe[:, 1::2] = torch.cos(p * rate)[:, : dim // 2]
    return pe.to(dtype)


def _split_heads(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries (B, T, d), keys and values (B, S, d) as (B, heads, T or S, d / heads) views."""
    B, T, d = q.shape
    S, dk = k.shape[1], d // heads
    return (
        q.view(B, T, heads, dk).transpose(1, 2),
        k.view(B, S, heads, dk).transpose(1, 2),
        v.view(B, S, heads, dk).transpose(1, 2),
    )


def attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int, allowed: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention over ``heads`` heads: queries (B, T, d), keys and values
    (B, S, d), ``allowed`` (B or 1, T or 1, S) True where a query may look (None: everywhere).
    Gives (the attended values (B, T, d), the weights (B, heads, T, S))."""
    B, T, d = q.shape
    qh, kh, vh = _split_heads(q, k, v, heads)
    scores = torch.matmul(qh, kh.transpose(2, 3)) / math.sqrt(d // heads)  # (B, h, T, S)
    if allowed is not None:
        scores = scores.masked_fill(~allowed.unsqueeze(1), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, vh).transpose(1, 2).reshape(B, T, d), weights


def attend_values(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int, allowed: torch.Tensor | None
) -> torch.Tensor:
    """``attend``'s attended values alone, through torch's fused ``scaled_dot_product_attention``
    (on the CPU one kernel over blocks of queries and keys, forward and backward, where
    ``attend`` takes eight operators and keeps the (B, heads, T, S) weights for the backward
    pass): equal to ``attend`` within float rounding (``tests/unit/test_transformer.py``). Every
    attention whose weights are not read runs through it."""
    B, T, d = q.shape
    qh, kh, vh = _split_heads(q, k, v, heads)
    mask = None if allowed is None else allowed.unsqueeze(1)
    return F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask).transpose(1, 2).reshape(B, T, d)


class FeedForward(nn.Module):
    def __init__(self, d: int, f: int):
        super().__init__()
        self.W_1, self.W_2 = nn.Linear(d, f), nn.Linear(f, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.W_2(torch.relu(self.W_1(x)))


class EncoderLayer(nn.Module):
    def __init__(self, d: int, f: int, heads: int, rate: float):
        super().__init__()
        self.heads = heads
        self.norm_1, self.norm_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ffn = FeedForward(d, f)
        self.drop = dropout(rate)

    def forward(self, x: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.norm_1(x)).chunk(3, dim=-1)
        x = x + self.drop(self.out(attend_values(q, k, v, self.heads, allowed)))
        return x + self.drop(self.ffn(self.norm_2(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d: int, f: int, heads: int, rate: float):
        super().__init__()
        self.heads = heads
        self.norm_1, self.norm_2, self.norm_3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.self_out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.query, self.memory_kv, self.cross_out = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d)
        self.ffn = FeedForward(d, f)
        self.drop = dropout(rate)

    def forward(
        self,
        y: torch.Tensor,
        past: torch.Tensor | None,
        causal: torch.Tensor | None,
        memory_kv: torch.Tensor,
        real: torch.Tensor,
        weights: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Positions y (B, T, d) after ``past`` (B, P, 2d: the keys and values of the positions
        before them, None: none), ``causal`` (T, P+T) or None (T = 1). Gives (the layer's output,
        the keys and values of y (B, T, 2d), the cross-attention output and weights: None
        unless ``weights``)."""
        qkv = self.qkv(self.norm_1(y))
        q, kv = qkv[..., : y.shape[-1]], qkv[..., y.shape[-1] :]
        keys, values = kv.chunk(2, dim=-1) if past is None else torch.cat([past, kv], dim=1).chunk(2, dim=-1)
        mask = None if causal is None else causal.unsqueeze(0)
        y = y + self.drop(self.self_out(attend_values(q, keys, values, self.heads, mask)))
        mk, mv = memory_kv.chunk(2, dim=-1)
        query, allowed = self.query(self.norm_2(y)), real.unsqueeze(1)
        if weights:
            ctx, cross_weights = attend(query, mk, mv, self.heads, allowed)
        else:
            ctx, cross_weights = attend_values(query, mk, mv, self.heads, allowed), None
        ctx = self.cross_out(ctx)
        y = y + self.drop(ctx)
        return y + self.drop(self.ffn(self.norm_3(y))), kv, ctx, cross_weights


@dataclass
class TransformerEncoded:
    """What the decoder reads of a batch of sources (``network.EncodedSource``): the memory
    (B, S, d), each decoder layer's cross-attention keys and values (B, S, L, 2d) and the
    real-position mask (B, S)."""

    memory: torch.Tensor
    cross: torch.Tensor
    real: torch.Tensor

    @property
    def sources(self) -> int:
        return self.memory.shape[0]

    @property
    def width(self) -> int:
        return self.memory.shape[1]

    def select(self, which: torch.Tensor, width: int | None = None) -> TransformerEncoded:
        cut = slice(None) if width is None else slice(0, width)
        return TransformerEncoded(self.memory[which, cut], self.cross[which, cut], self.real[which, cut])

    def padded(self, width: int) -> TransformerEncoded:
        extra = width - self.width
        if extra <= 0:
            return self
        return TransformerEncoded(
            F.pad(self.memory, (0, 0, 0, extra)),
            F.pad(self.cross, (0, 0, 0, 0, 0, extra)),
            F.pad(self.real, (0, extra)),
        )

    def cat(self, others: Sequence[TransformerEncoded]) -> TransformerEncoded:
        parts = [self, *others]
        return TransformerEncoded(
            torch.cat([p.memory for p in parts]),
            torch.cat([p.cross for p in parts]),
            torch.cat([p.real for p in parts]),
        )


class TransformerEncoderDecoder(nn.Module):
    def __init__(self, config: ModelConfig, arch: ArchConfig):
        super().__init__()
        problem = size_problem(config.embed_dim, arch)
        if problem:
            raise ValueError(problem)
        self.config, self.arch = config, arch
        d, f, L = config.embed_dim, config.hidden_dim, arch.layers
        self.src_embed = nn.Embedding(config.src_vocab_size, d)
        self.tgt_embed = nn.Embedding(config.tgt_vocab_size, d)  # also the output matrix
        self.encoder_layers = nn.ModuleList(EncoderLayer(d, f, arch.heads, arch.dropout) for _ in range(L))
        self.decoder_layers = nn.ModuleList(DecoderLayer(d, f, arch.heads, arch.dropout) for _ in range(L))
        self.encoder_norm, self.decoder_norm = nn.LayerNorm(d), nn.LayerNorm(d)
        self.output_bias = nn.Parameter(torch.zeros(config.tgt_vocab_size))
        self.embed_dropout = dropout(arch.embedding_dropout)
        self.reset_parameters()

    def reset_parameters(self, std: float = 0.01) -> None:
        """Embeddings N(0, std^2); the layers' matrices Xavier-uniform (Vaswani et al.), biases 0,
        layer norms the identity."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name in ("src_embed.weight", "tgt_embed.weight"):
                    p.normal_(0.0, std)
                elif "norm" in name and name.endswith("weight"):
                    p.fill_(1.0)
                elif p.dim() == 2:
                    nn.init.xavier_uniform_(p)
                else:
                    p.zero_()

    def _inputs(self, embedded: torch.Tensor, first: int) -> torch.Tensor:
        """dropout_e(sqrt(d) e + PE) of embeddings (B, T, d) at positions first .. first+T-1."""
        d = self.config.embed_dim
        pe = positions(first, embedded.shape[1], d, embedded.device, embedded.dtype)
        return self.embed_dropout(embedded * math.sqrt(d) + pe)

    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> TransformerEncoded:
        real = torch.arange(src.shape[1], device=src.device).unsqueeze(0) < src_len.unsqueeze(1)
        x = self._inputs(self.src_embed(src), 0)
        allowed = real.unsqueeze(1)
        for layer in self.encoder_layers:
            x = layer(x, allowed)
        memory = self.encoder_norm(x)
        cross = torch.stack([layer.memory_kv(memory) for layer in self._decoders()], dim=2)
        return TransformerEncoded(memory, cross, real)

    def _decoders(self) -> list[DecoderLayer]:
        return cast(list[DecoderLayer], list(self.decoder_layers))

    def _decode(
        self,
        y: torch.Tensor,
        past: torch.Tensor | None,
        causal: torch.Tensor | None,
        enc: TransformerEncoded,
        weights: bool = True,
    ) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor, torch.Tensor | None]:
        """Positions y (B, T, d) through every decoder layer, after the positions whose keys and
        values ``past`` holds (B, P, L, 2d; None: none): (the top output, each layer's keys and
        values of y, the top layer's cross-attention output and its weights averaged over the
        heads (B, T, S), None unless ``weights``)."""
        kvs: list[torch.Tensor] = []
        ctx, top_weights = y, None
        layers = self._decoders()
        for i, layer in enumerate(layers):
            y, kv, ctx, top_weights = layer(
                y,
                None if past is None else past[:, :, i],
                causal,
                enc.cross[:, :, i],
                enc.real,
                weights=weights and i == len(layers) - 1,
            )
            kvs.append(kv)
        return y, kvs, ctx, None if top_weights is None else top_weights.mean(1)

    def start(self, enc: TransformerEncoded) -> torch.Tensor:
        return enc.memory.new_zeros(enc.sources, 0)

    def step(
        self, y_prev: torch.Tensor, state: torch.Tensor, enc: TransformerEncoded
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        B, d, L = y_prev.shape[0], self.config.embed_dim, self.arch.layers
        done = state.shape[1] // (L * 2 * d)  # the positions already decoded
        past = state.view(B, done, L, 2 * d)
        y, kvs, ctx, weights = self._decode(self._inputs(y_prev.unsqueeze(1), done), past if done else None, None, enc)
        grown = torch.cat([past, torch.stack(kvs, dim=2)], dim=1).reshape(B, -1)
        return grown, y[:, 0], ctx[:, 0], None if weights is None else weights[:, 0]

    def readout(self, top: torch.Tensor, y_prev: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        return F.linear(self.decoder_norm(top), self.tgt_embed.weight, self.output_bias)

    def previous_word_embeddings(self, tgt: torch.Tensor) -> torch.Tensor:
        """e(y_{i-1}) for i = 1..T (B, T, d): a zero vector first, then the shifted targets."""
        return F.pad(self.tgt_embed(tgt[:, :-1]), (0, 0, 1, 0))

    def decode_outputs(
        self, enc: TransformerEncoded, tgt: torch.Tensor, weights: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Every position of targets (B, T) at once under a causal mask: (top outputs (B, T, d),
        e(y_{i-1}) (B, T, d), the top layer's cross-attention output (B, T, d), its weights
        averaged over the heads (B, T, S); None unless ``weights``: training does not read them)."""
        T = tgt.shape[1]
        y_prev = self.previous_word_embeddings(tgt)
        causal = torch.ones(T, T, dtype=torch.bool, device=tgt.device).tril()
        y, _, ctx, top_weights = self._decode(self._inputs(y_prev, 0), None, causal, enc, weights)
        return y, y_prev, ctx, top_weights

    def representation(self, enc: TransformerEncoded) -> torch.Tensor:
        """The mean of the memory over each phrase's positions (its </s> included)."""
        real = enc.real.unsqueeze(2).to(enc.memory.dtype)
        return (enc.memory * real).sum(1) / real.sum(1)

    def forward(self, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        tops, y_prev, ctxs, _ = self.decode_outputs(self.encode(src, src_len), tgt)
        return self.readout(tops, y_prev, ctxs)
