"""The encoder-decoder built from options (``arch_options.ArchConfig``): embeddings, an
``encoders.Encoder``, a ``decoders.Decoder``; the rnnsearch and gnmt architectures.

It implements ``network.Network``: ``encode`` gives an ``Encoded`` (memory, attention keys,
mask, summary); ``start`` / ``step`` / ``readout`` are the decoder's (its state packs every
layer's); ``forward(src, src_len, tgt)`` gives teacher-forced logits (B, T, V) for
``cho2014.sequence_log_probs`` (training, validation, the reference scorer).

Dropout (``ArchConfig.dropout``, ``embed_dropout``; Srivastava et al. 2014, applied as Zaremba et
al. 2014 do to recurrent networks: on what flows between layers, never on a cell's own state):
on the source and target embeddings, on every encoder and decoder layer's output, on each
step's context and on the maxout readout before the output matrix. It acts in training mode
only; in eval mode (every network loaded from a file, every scorer) it is the identity.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .arch_options import ArchConfig
from .cho2014 import ModelConfig
from .decoders import Decoder, Encoded, Project
from .encoders import Encoder, dropout


class StackedEncoderDecoder(nn.Module):
    def __init__(self, config: ModelConfig, arch: ArchConfig):
        super().__init__()
        self.config, self.arch = config, arch
        c, E, H = config, config.embed_dim, config.hidden_dim
        self.src_embed = nn.Embedding(c.src_vocab_size, E)
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, E)
        self.embed_dropout = dropout(arch.embedding_dropout)
        self.encoder = Encoder(
            arch.cell_type, E, H, arch.layers, arch.bidirectional, arch.residual_from, c.cell, arch.dropout
        )
        self.decoder = Decoder(
            arch.cell_type,
            E,
            H,
            self.encoder.memory_dim,
            c.tgt_vocab_size,
            c.maxout_dim,
            c.output_rank,
            arch.layers,
            arch.attention,
            arch.attention_from,
            arch.residual_from,
            c.cell,
            arch.dropout,
        )
        self.reset_parameters()

    def reset_parameters(self, std: float = 0.01) -> None:
        """N(0, std^2) weights, zero biases, then each cell's own start (orthogonal recurrent
        matrices; the LSTM's forget bias 1)."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                p.zero_() if name.endswith("bias") else p.normal_(0.0, std)
        for cell in [*self.encoder.cells(), *(self.decoder.layer(i) for i in range(self.decoder.layers))]:
            cell.initialise(std)

    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> Encoded:
        """Memory, attention keys, mask and summary of </s>-terminated, right-padded sources."""
        memory, final = self.encoder(self.source_embeddings(src), src_len)
        return self.encoded(memory, final, src_len)

    def source_embeddings(self, src: torch.Tensor) -> torch.Tensor:
        """The encoder's input (B, S, E): the source embeddings, dropped out in training mode."""
        return self.embed_dropout(self.src_embed(src))

    def encoded(self, memory: torch.Tensor, final: torch.Tensor, src_len: torch.Tensor) -> Encoded:
        """``encode``'s result from the encoder's output (memory (B, S, D), final (B, D)); training
        computes that output in another order (``training.packed_encoder``)."""
        real = torch.arange(memory.shape[1], device=memory.device).unsqueeze(0) < src_len.unsqueeze(1)
        keys = self.decoder.attention.keys(memory) if self.decoder.attention is not None else memory
        return Encoded(memory, keys, real, final)

    def start(self, enc: Encoded) -> torch.Tensor:
        return self.decoder.start(enc)

    def step(
        self, y_prev: torch.Tensor, state: torch.Tensor, enc: Encoded
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        return self.decoder.step(y_prev, state, enc)

    def readout(self, top: torch.Tensor, y_prev: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        return self.decoder.readout(top, y_prev, ctx)

    def representation(self, enc: Encoded) -> torch.Tensor:
        """The mean of the encoder states over each phrase's positions (its </s> included): an
        attention model has no single summary, the decoder reads every state."""
        real = enc.real.unsqueeze(2).to(enc.memory.dtype)
        return (enc.memory * real).sum(1) / real.sum(1)

    def previous_word_embeddings(self, tgt: torch.Tensor) -> torch.Tensor:
        """e(y_{i-1}) for i = 1..T (B, T, E): a zero vector first, then the shifted targets."""
        return F.pad(self.embed_dropout(self.tgt_embed(tgt[:, :-1])), (0, 0, 1, 0))

    def decode_outputs(
        self, enc: Encoded, tgt: torch.Tensor, project: Project | None = None, recurrent: Project | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Teacher forcing: (x^L (B, T, H), e(y_{i-1}) (B, T, E), ctx (B, T, D), attention
        weights (B, T, S) or None) for targets (B, T); ``project``, ``recurrent``: ``Decoder.step``'s."""
        y_prev = self.previous_word_embeddings(tgt)
        state = self.decoder.start(enc)
        tops, ctxs, weights = [], [], []
        for i in range(tgt.shape[1]):
            state, top, ctx, a = self.decoder.step(y_prev[:, i], state, enc, project, recurrent)
            tops.append(top)
            ctxs.append(ctx)
            if a is not None:
                weights.append(a)
        return (torch.stack(tops, 1), y_prev, torch.stack(ctxs, 1), torch.stack(weights, 1) if weights else None)

    def forward(self, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        tops, y_prev, ctxs, _ = self.decode_outputs(self.encode(src, src_len), tgt)
        return self.decoder.readout(tops, y_prev, ctxs)
