"""The RNN Encoder-Decoder of Cho et al. (2014), readable against the paper.

Symbols follow the paper (section 2 and appendix A); shapes are written ``(B, T, H)`` with
B pairs, S source / T target steps, E embedding size, H hidden size, M maxout units,
R output rank and V target shortlist size.

Encoder (over ``x_1 .. x_N </s>``)::

    r   = sigma(W_r e(x_t) + U_r h_{t-1})
    z   = sigma(W_z e(x_t) + U_z h_{t-1})
    h~  = tanh (W e(x_t) + U (r * h_{t-1}))          # reset BEFORE the recurrent matrix
    h_t = z * h_{t-1} + (1 - z) * h~
    c   = tanh(V h_N)                                 # the summary ("phrase representation")

Decoder (predicting ``y_1 .. y_M </s>``; there is no begin symbol: e(y_0) = 0)::

    h'_0 = tanh(V' c)                                 # the bridge
    r'   = sigma(W'_r e(y_{t-1}) + U'_r h'_{t-1} + C_r c)
    z'   = sigma(W'_z e(y_{t-1}) + U'_z h'_{t-1} + C_z c)
    h~'  = tanh (W' e(y_{t-1}) + U' (r' * h'_{t-1}) + C c)
    h'_t = z' * h'_{t-1} + (1 - z') * h~'

Deep output ("readout")::

    s'  = O_h h'_t + O_y e(y_{t-1}) + O_c c           # 2M units
    s_i = max(s'_{2i-1}, s'_{2i})                     # maxout over pairs: M units
    p(y_t | y_<t, c) = softmax(G_l (G_r s))           # output matrix factorised at rank R

Deliberate choices where the paper is silent: every affine map that feeds a nonlinearity carries
a bias (as the original GroundHog code did); the recurrent and context matrices carry none, since
each sum already has one. All weights start as N(0, 0.01^2), the recurrent matrices U_r, U_z, U
orthogonal, biases zero. ``cell="reset_after"`` offers the cuDNN-style GRU
(``tanh(W x + r * (U h))``) as a named speed option; it is a different function and never the
default. ``summary="last"`` uses c = h_N, as the original code did, instead of tanh(V h_N).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

CELLS = ("reset_before", "reset_after")
SUMMARIES = ("tanh", "last")


@dataclass(frozen=True)
class ModelConfig:
    src_vocab_size: int = 15000  # source shortlist, special symbols included
    tgt_vocab_size: int = 15000  # target shortlist, special symbols included
    embed_dim: int = 100  # E: word embeddings of both sides (the paper's rank-100 input matrices)
    hidden_dim: int = 1000  # H: encoder and decoder GRU units
    maxout_dim: int = 500  # M: readout units after maxout (s' has 2M)
    output_rank: int = 100  # R: rank of the factorised output matrix G = G_l G_r
    cell: str = "reset_before"  # the paper's GRU; "reset_after" is the cuDNN-style variant
    summary: str = "tanh"  # c = tanh(V h_N) as the paper writes it; "last": c = h_N

    def __post_init__(self) -> None:
        if self.cell not in CELLS:
            raise ValueError(f"cell must be one of {CELLS}, not {self.cell!r}")
        if self.summary not in SUMMARIES:
            raise ValueError(f"summary must be one of {SUMMARIES}, not {self.summary!r}")
        for f in ("src_vocab_size", "tgt_vocab_size", "embed_dim", "hidden_dim", "maxout_dim", "output_rank"):
            if getattr(self, f) <= 0:
                raise ValueError(f"{f} must be positive")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown model settings: {sorted(unknown)}")
        return cls(**d)


#: Named sizes. ``vocab_size`` is the shortlist size per side, special symbols included.
#: ``paper`` is the paper's; ``small`` and ``medium`` were chosen by held-out perplexity on the
#: en-fr sentence pairs (docs/nmt.md, "Presets"): with train-nmt's defaults, larger networks
#: reached a worse best (they overfit without dropout).
PRESETS: dict[str, dict[str, int]] = {
    "paper": dict(vocab_size=15000, embed_dim=100, hidden_dim=1000, maxout_dim=500, output_rank=100),
    "medium": dict(vocab_size=8000, embed_dim=256, hidden_dim=512, maxout_dim=256, output_rank=128),
    "small": dict(vocab_size=8000, embed_dim=64, hidden_dim=256, maxout_dim=128, output_rank=64),
}


#: ``layer(x)`` computed another way: (layer, x) -> the same values, to rounding (training's
#: ``deferred_weights``: ``Decoder.step``, ``GRU.step``, ``Attention``).
Project = Callable[[nn.Linear, torch.Tensor], torch.Tensor]


def _apply(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``layer(x)``: the ``Project`` of the model's own computation."""
    return layer(x)


class GRU(nn.Module):
    """The paper's gated recurrent unit, one step at a time over pre-projected inputs.

    The input projections ``[W_r; W_z; W] x + b`` do not depend on the state, so callers compute
    them for all time steps in one matrix product and pass one row per step to ``step``.
    """

    def __init__(self, input_dim: int, hidden_dim: int, cell: str = "reset_before"):
        super().__init__()
        self.hidden_dim = hidden_dim
        self.cell = cell
        self.W = nn.Linear(input_dim, 3 * hidden_dim)  # [W_r; W_z; W] and their biases
        self.U_rz = nn.Linear(hidden_dim, 2 * hidden_dim, bias=False)  # [U_r; U_z]
        self.U = nn.Linear(hidden_dim, hidden_dim, bias=False)  # U

    def step(self, x_proj: torch.Tensor, h: torch.Tensor, project: Project | None = None) -> torch.Tensor:
        """h_t from x_proj = W.. x_t (+ context terms) (B, 3H) and h_{t-1} (B, H); ``project``:
        the products with U_rz and U computed another way (``Project``)."""
        H = self.hidden_dim
        apply = _apply if project is None else project
        rz = apply(self.U_rz, h)  # (B, 2H)
        r = torch.sigmoid(x_proj[:, :H] + rz[:, :H])
        z = torch.sigmoid(x_proj[:, H : 2 * H] + rz[:, H:])
        if self.cell == "reset_before":
            h_tilde = torch.tanh(x_proj[:, 2 * H :] + apply(self.U, r * h))
        else:
            h_tilde = torch.tanh(x_proj[:, 2 * H :] + r * apply(self.U, h))
        return z * h + (1.0 - z) * h_tilde

    def recurrent_matrices(self) -> list[torch.Tensor]:
        H = self.hidden_dim
        return [self.U_rz.weight[:H], self.U_rz.weight[H:], self.U.weight]


@dataclass
class Summary:
    """The encoded sources of the paper's network (``network.EncodedSource``): c (B, H) and its
    context terms h'_0 (B, H), C.. c (B, 3H), O_c c (B, 2M), computed once per source."""

    c: torch.Tensor
    h0: torch.Tensor
    ctx: torch.Tensor
    oc: torch.Tensor

    @property
    def sources(self) -> int:
        return self.c.shape[0]

    @property
    def width(self) -> int:
        return 1  # no source positions: the decoder reads c only

    def select(self, which: torch.Tensor, width: int | None = None) -> Summary:
        return Summary(self.c[which], self.h0[which], self.ctx[which], self.oc[which])

    def padded(self, width: int) -> Summary:
        return self

    def cat(self, others: Sequence[Summary]) -> Summary:
        parts = [self, *others]
        return Summary(*(torch.cat([getattr(p, k) for p in parts]) for k in ("c", "h0", "ctx", "oc")))


class RNNEncoderDecoder(nn.Module):
    """The paper's network; it implements ``network.Network`` (``encode`` gives a ``Summary``;
    the decoder state is h'_t; a step's context is O_c c) and ``network.SummaryNetwork``."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = c = config
        E, H, M, R = c.embed_dim, c.hidden_dim, c.maxout_dim, c.output_rank
        self.src_embed = nn.Embedding(c.src_vocab_size, E)  # e(x)
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, E)  # e(y)
        self.encoder = GRU(E, H, c.cell)
        self.V = nn.Linear(H, H)  # summary: c = tanh(V h_N)
        self.bridge = nn.Linear(H, H)  # V': h'_0 = tanh(V' c)
        self.decoder = GRU(E, H, c.cell)
        self.C = nn.Linear(H, 3 * H, bias=False)  # [C_r; C_z; C] c
        self.O_h = nn.Linear(H, 2 * M)  # readout terms; O_h carries the readout bias
        self.O_y = nn.Linear(E, 2 * M, bias=False)
        self.O_c = nn.Linear(H, 2 * M, bias=False)
        self.G_r = nn.Linear(M, R, bias=False)  # output matrix, factorised: G = G_l G_r
        self.G_l = nn.Linear(R, c.tgt_vocab_size)
        self.reset_parameters()

    def reset_parameters(self, std: float = 0.01) -> None:
        """N(0, std^2) weights (the paper: std 0.01), orthogonal recurrent matrices, zero biases.

        Small networks learn to use c sooner from a larger std (the demo uses 0.05): at 0.01 the
        summary stays nearly constant for thousands of steps and the decoder ignores its source.
        """
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    p.zero_()
                else:
                    p.normal_(0.0, std)
            for gru in (self.encoder, self.decoder):
                for U in gru.recurrent_matrices():
                    U.copy_(_orthogonal(U.shape[0], U.shape[1]))

    # --- encoder -------------------------------------------------------------------------------

    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> Summary:
        """The summary c (B, H) of </s>-terminated, right-padded sources (B, S), with its
        context terms."""
        c = self.summarize(self.encoder_states(src, src_len))
        return Summary(c, *self.context_terms(c))

    def encoder_states(self, src: torch.Tensor, src_len: torch.Tensor) -> torch.Tensor:
        """h_{N+1} (B, H): the encoder's state after each source's </s>."""
        x_proj = self.encoder.W(self.src_embed(src))  # (B, S, 3H), all steps at once
        B, S = src.shape
        h = x_proj.new_zeros(B, self.config.hidden_dim)
        for t in range(S):
            h_new = self.encoder.step(x_proj[:, t], h)
            h = torch.where((t < src_len).unsqueeze(1), h_new, h)  # padding leaves h unchanged
        return h

    def summarize(self, h_last: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.V(h_last)) if self.config.summary == "tanh" else h_last

    # --- decoder -------------------------------------------------------------------------------

    def context_terms(self, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """What the decoder needs of c, once per source: (h'_0, C.. c (B, 3H), O_c c (B, 2M))."""
        return torch.tanh(self.bridge(c)), self.C(c), self.O_c(c)

    def previous_word_embeddings(self, tgt: torch.Tensor) -> torch.Tensor:
        """e(y_{t-1}) for t = 1..T (B, T, E): a zero vector first, then the shifted targets."""
        emb = self.tgt_embed(tgt[:, :-1])
        return F.pad(emb, (0, 0, 1, 0))

    def decoder_inputs(self, y_prev: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        """W' e(y_{t-1}) + C c (.., 3H): the decoder GRU's input projection, for one step or all
        steps at once (ctx broadcast over them)."""
        return self.decoder.W(y_prev) + ctx

    def decoder_step(self, x_proj: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """h'_t (.., H) from the step's input projection (``decoder_inputs``) and h'_{t-1}: the one
        decoder step of training, the scorers and the search."""
        return self.decoder.step(x_proj, h)

    def readout(self, h: torch.Tensor, y_prev: torch.Tensor, oc: torch.Tensor) -> torch.Tensor:
        """Logits over the target shortlist from h'_t (.., H), e(y_{t-1}) (.., E), O_c c (.., 2M)."""
        return self.G_l(self.readout_features(h, y_prev, oc))  # (.., V)

    def readout_features(self, h: torch.Tensor, y_prev: torch.Tensor, oc: torch.Tensor) -> torch.Tensor:
        """G_r s (.., R): the readout before its output layer ``G_l``."""
        s = self.O_h(h) + self.O_y(y_prev) + oc  # (.., 2M)
        s = s.unflatten(-1, (self.config.maxout_dim, 2)).amax(-1)  # maxout over pairs: (.., M)
        return self.G_r(s)

    def start(self, enc: Summary) -> torch.Tensor:
        return enc.h0

    def step(
        self, y_prev: torch.Tensor, h: torch.Tensor, enc: Summary
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, None]:
        """(h'_t, h'_t, O_c c, no attention) from e(y_{t-1}) (B, E) and h'_{t-1} (B, H)."""
        h = self.decoder_step(self.decoder_inputs(y_prev, enc.ctx), h)
        return h, h, enc.oc, None

    def decode_outputs(self, enc: Summary, tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, None]:
        """Teacher forcing over targets (B, T): (h'_1..h'_T, e(y_0)..e(y_{T-1}), O_c c per step,
        no attention), the decoder inputs of all steps computed at once."""
        h = enc.h0
        y_prev = self.previous_word_embeddings(tgt)  # (B, T, E)
        x_proj = self.decoder_inputs(y_prev, enc.ctx.unsqueeze(1))  # (B, T, 3H), all steps at once
        states = []
        for t in range(tgt.shape[1]):
            h = self.decoder_step(x_proj[:, t], h)
            states.append(h)
        return torch.stack(states, 1), y_prev, enc.oc.unsqueeze(1).expand(-1, tgt.shape[1], -1), None

    def representation(self, enc: Summary) -> torch.Tensor:
        """c, the paper's phrase representation."""
        return enc.c

    def forward(self, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits (B, T, V) for </s>-terminated targets (B, T)."""
        tops, y_prev, ocs, _ = self.decode_outputs(self.encode(src, src_len), tgt)
        return self.readout(tops, y_prev, ocs)


def token_log_probs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log p(target) under softmax(logits), for any leading shape: logits (.., V), targets (..).

    Computed in at least float32 (bf16/fp16 logits are widened; float64 stays float64)."""
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def sequence_token_log_probs(
    model: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    src: torch.Tensor,
    src_len: torch.Tensor,
    tgt: torch.Tensor,
    tgt_len: torch.Tensor,
) -> torch.Tensor:
    """log p(y_t | y_<t, e) of every target token and </s> (B, T), 0 at the padding: the terms
    that :func:`sequence_log_probs` sums (``score --word-scores`` prints them)."""
    logp = token_log_probs(model(src, src_len, tgt), tgt)  # (B, T)
    mask = torch.arange(tgt.shape[1], device=tgt.device).unsqueeze(0) < tgt_len.unsqueeze(1)
    return logp.masked_fill(~mask, 0.0)


def sequence_log_probs(
    model: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    src: torch.Tensor,
    src_len: torch.Tensor,
    tgt: torch.Tensor,
    tgt_len: torch.Tensor,
) -> torch.Tensor:
    """log p(f | e) per pair (B,): the sum over the target tokens and </s> of log p(y_t | y_<t, e).

    ``model``: any ``network.Network`` (its teacher-forced logits). The one definition of the
    score: the training loss, validation, the reference scorer and the tests all use it; the
    fast scorers are tested against it.
    """
    return sequence_token_log_probs(model, src, src_len, tgt, tgt_len).sum(1)


def _orthogonal(rows: int, cols: int) -> torch.Tensor:
    """Left singular vectors of a Gaussian matrix (the paper's recurrent initialisation)."""
    u, _, vh = torch.linalg.svd(torch.randn(rows, cols), full_matrices=False)
    return u if u.shape == (rows, cols) else vh
