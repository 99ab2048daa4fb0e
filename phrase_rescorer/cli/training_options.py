"""The options ``train`` on phrase pairs and ``train-nmt`` on sentence pairs share (the model's,
the data's, the optimizer's), with each command's own defaults, and the loop's from
``loop_options``: one definition of each option."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ..data.units import MAX_UNCOVERED, MIN_SUBWORDS, UNITS
from ..model.architectures import ARCH_NAMES
from ..model.attention import ATTENTIONS
from ..model.cells import CELL_TYPES
from ..model.cho2014 import CELLS, PRESETS, SUMMARIES, ModelConfig
from ..model.decoders import ATTENTION_FROM
from ..model.kinds import DIRECTIONS
from ..training.dropout_masks import KERNELS as DROPOUT_KERNELS
from ..training.optim import KERNELS
from ..training.run_settings import OPTIMIZERS, TrainConfig
from .loop_options import loop_option, loop_options
from .text import language_option

#: Size options (a preset's, each overridable) and architecture options, as the commands pass them.
SIZES = ("embed_dim", "hidden_dim", "maxout_dim", "output_rank")
ARCH: tuple[str, ...] = ("cell_type", "layers", "bidirectional", "residual_from", "attention", "attention_from")
ARCH += ("dropout", "embed_dropout")  # stored with the architecture's options, as the rates of its modules
ARCH += ("heads",)
_MODEL_DEFAULTS = ModelConfig()


def training_options(
    *, data: str, inputs: str, defaults: TrainConfig, arch: str, preset: str, units: str = "words"
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The shared options as one decorator. ``inspect_table`` names what trains ("table", "corpus"),
    ``inputs`` the arguments --resume needs unchanged; ``defaults``, ``arch``, ``preset`` and
    ``units`` are the command's defaults."""
    options = [
        click.option(
            "--preset",
            type=click.Choice(sorted(PRESETS)),
            default=preset,
            show_default=True,
            help="Model sizes (shortlist per side, embeddings, hidden, maxout, output rank): "
            + ", ".join(f"{name} ({', '.join(map(str, sizes.values()))})" for name, sizes in PRESETS.items())
            + ". Each size option below overrides.",
        ),
        click.option("--vocab-size", type=click.IntRange(4), help="Shortlist size per side, special symbols included."),
        click.option("--embed-dim", type=click.IntRange(1), help="Word embedding size (both sides)."),
        click.option("--hidden-dim", type=click.IntRange(1), help="GRU units of encoder and decoder."),
        click.option("--maxout-dim", type=click.IntRange(1), help="Readout units after maxout."),
        click.option("--output-rank", type=click.IntRange(1), help="Rank of the factorised output matrix."),
        click.option(
            "--cell",
            type=click.Choice(CELLS),
            default=_MODEL_DEFAULTS.cell,
            show_default=True,
            help="reset_before: the paper's GRU; reset_after: the cuDNN-style variant.",
        ),
        click.option(
            "--summary",
            type=click.Choice(SUMMARIES),
            default=_MODEL_DEFAULTS.summary,
            show_default=True,
            help="tanh: c = tanh(V h_N) as in the paper; last: c = h_N as in the original code.",
        ),
        click.option(
            "--arch",
            type=click.Choice(ARCH_NAMES),
            default=arch,
            show_default=True,
            help="cho2014: the paper's network (Cho et al. 2014); rnnsearch: Bahdanau et al. 2015 "
            "(bidirectional GRU encoder, additive attention); gnmt: Wu et al. 2016 scaled "
            "to phrases (LSTM, bidirectional bottom layer, residual from layer 3, attention "
            "from the bottom decoder layer; 4 layers); transformer: Vaswani et al. 2017, pre-norm "
            "(4 layers, 4 heads; its width is --embed-dim, its feed-forward --hidden-dim). The "
            "options below override an architecture's own (docs/architectures.md); cho2014 takes "
            "none, the transformer only --layers, --heads and the dropout rates.",
        ),
        click.option(
            "--layers", type=click.IntRange(1), help="Encoder and decoder layers [rnnsearch 1, gnmt 4, transformer 4]."
        ),
        click.option("--heads", type=click.IntRange(1), help="Attention heads of the transformer [4]."),
        click.option(
            "--cell-type",
            type=click.Choice(CELL_TYPES),
            help="Recurrent cell [rnnsearch gru, gnmt lstm]; --cell picks the GRU variant.",
        ),
        click.option(
            "--attention",
            type=click.Choice(ATTENTIONS),
            help="none (a fixed summary, as cho2014), additive (Bahdanau), dot or general (Luong) [additive].",
        ),
        click.option(
            "--attention-from",
            type=click.Choice(ATTENTION_FROM),
            help="Decoder layer whose previous output queries the attention [rnnsearch top, gnmt bottom].",
        ),
        click.option(
            "--bidirectional/--unidirectional", default=None, help="Bidirectional bottom encoder layer [yes for both]."
        ),
        click.option(
            "--residual-from",
            type=click.IntRange(0),
            help="Residual connections from this layer up, 0 for none [rnnsearch 0, gnmt 3].",
        ),
        # Regularisation (docs/nmt.md, "Regularisation"): dropout, label smoothing, kept networks to average.
        click.option(
            "--dropout",
            type=click.FloatRange(0, 1, max_open=True),
            help="Dropout rate, in training only, on the embeddings, every recurrent layer's outputs, "
            "the attention context and the readout (transformer: every sub-layer's output); stored in "
            "MODEL_OUT (rnnsearch, gnmt, transformer) [0].",
        ),
        click.option(
            "--embed-dropout",
            type=click.FloatRange(0, 1, max_open=True),
            help="Dropout rate of the source and target embeddings  [default: --dropout]",
        ),
        click.option(
            "--label-smoothing",
            type=click.FloatRange(0, 1, max_open=True),
            default=defaults.label_smoothing,
            show_default=True,
            help="Train on targets smoothed by this much probability spread over the target "
            "vocabulary (Szegedy et al. 2016); the training loss only: held-out perplexity and "
            "every score stay log p. With cho2014, training runs without its packed computation.",
        ),
        loop_option("keep_checkpoints", defaults.loop),
        click.option(
            "--units",
            type=click.Choice(UNITS),
            default=units,
            show_default=True,
            help="What the network reads and predicts. words: each side's shortlist of words "
            "(--vocab-size; any other word is <unk>); subwords: subword units that spell every word "
            "(--subwords N, by default as many as the shortlist has entries); auto: subword units where "
            f"the word shortlists leave more than {100 * MAX_UNCOVERED:g} % of either side's tokens of "
            f"the {data} outside, words elsewhere (a line says what it measured; the model file records "
            "the choice and --resume keeps it; docs/nmt.md).",
        ),
        click.option(
            "--subwords",
            type=click.IntRange(MIN_SUBWORDS),
            help="Split every token into subword units: learn at most this many units per side "
            f"on the {data}'s own text (SentencePiece BPE with byte fallback, stored in "
            "MODEL_OUT); a pair then scores as the sum of log p over its target's units plus "
            "</s>. Tables and n-best lists are read and written unchanged. Byte fallback takes 257 "
            "units: where the text has more than N - 257 distinct characters, the rarer ones are "
            "spelled by their bytes. No unit is ever "
            "unknown, so rescore's --unk-feature (WP) column is 0 (written exp(0) = 1) with "
            "such a model. Replaces --vocab-size; implies --units subwords.",
        ),
        click.option(
            "--batch-size",
            type=click.IntRange(1),
            default=defaults.batch_size,
            show_default=True,
            help="Unique pairs per minibatch (unless --batch-tokens). Under torchrun, per "
            "process: the global batch is --batch-size x processes.",
        ),
        click.option(
            "--batch-tokens",
            type=click.IntRange(1),
            default=defaults.batch_tokens,
            show_default=defaults.batch_tokens is not None,
            help="Cut minibatches by size instead: as many pairs as keep the padded target "
            "(pairs x longest target) within this many tokens, as sentence-level "
            "toolkits do. Under torchrun, per process.",
        ),
        click.option(
            "--max-length",
            type=click.IntRange(1),
            default=defaults.max_length,
            show_default=True,
            help="Pairs with a longer source or target do not train (scoring keeps every pair).",
        ),
        click.option(
            "--valid-fraction",
            type=click.FloatRange(0, 0.5),
            default=defaults.valid_fraction,
            show_default=True,
            help="Share of the unique pairs held out (chosen by the pair's hash).",
        ),
        click.option(
            "--valid-max",
            type=click.IntRange(0),
            default=defaults.valid_max,
            show_default=True,
            help="Held-out pairs scored at each validation (the first ones in table order).",
        ),
        click.option(
            "--optimizer",
            type=click.Choice(OPTIMIZERS),
            default=defaults.optimizer,
            show_default=True,
            help="adadelta: the paper's (--rho, --eps); adam: Kingma and Ba 2015, as "
            "sentence-level NMT toolkits train (give its --lr, e.g. 0.001).",
        ),
        click.option(
            "--optimizer-kernel",
            type=click.Choice(KERNELS),
            default=defaults.optimizer_kernel,
            show_default=True,
            help="How Adadelta's update runs on a CPU. compiled: one C loop over all parameters, "
            "split over the threads, equal to torch's Adadelta within float32 rounding, several times "
            "faster than torch's (docs/training-speed.md) (built with the machine's C compiler, $CC "
            "or cc, on first use and kept in ~/.cache/phrase_rescorer; where it cannot be built "
            "a warning says so and the run goes on chunked). chunked: torch's own operations bit "
            "for bit, in cache-sized pieces.",
        ),
        click.option(
            "--dropout-kernel",
            type=click.Choice(DROPOUT_KERNELS),
            default=defaults.dropout_kernel,
            show_default=True,
            help="How dropout draws its masks in training on a CPU. compiled: one C loop draws them "
            "with a counter-based generator (Philox4x32-10, keyed from the run's --seed) and applies "
            "them, forward and backward 3-5 times as fast as torch's Bernoulli draws; the same "
            "distribution and "
            "arithmetic, other random numbers (docs/training-speed.md; built like "
            "--optimizer-kernel's loop; where it cannot be built a warning says so and torch's "
            "dropout runs). torch: nn.Dropout's own draws.",
        ),
        click.option(
            "--rho",
            type=click.FloatRange(0, 1, max_open=True),
            default=defaults.rho,
            show_default=True,
            help="Adadelta decay.",
        ),
        click.option(
            "--eps",
            type=click.FloatRange(0, min_open=True),
            default=defaults.eps,
            show_default=True,
            help="Adadelta epsilon.",
        ),
        click.option(
            "--clip-norm",
            type=click.FloatRange(0, min_open=True),
            default=defaults.clip_norm,
            show_default=True,
            help="Gradient-norm clipping threshold (the paper's 1).",
        ),
        click.option(
            "--init-std",
            type=click.FloatRange(0, min_open=True),
            default=defaults.init_std,
            show_default=True,
            help="Standard deviation of the initial weights (the paper's 0.01; networks trained "
            "for hours rather than weeks use their source sooner from about 0.05).",
        ),
        click.option(
            "--bf16",
            is_flag=True,
            help="Matrix products in bfloat16 (autocast; weights and optimizer stay float32). "
            "Costs exactness: products keep 8 significant bits (2-3 decimal digits), and "
            "held-out perplexity suffers (docs/performance.md). Fast "
            "only on GPUs and on CPUs with AMX-BF16 or AVX512-BF16; elsewhere many times "
            "slower than float32 (a warning says so).",
        ),
        click.option(
            "--bf16-steps",
            is_flag=True,
            help="The products each decoder step applies (rnnsearch, gnmt: the cells' input "
            "projections and recurrent matrices, the attention's query projection) with bfloat16 "
            "operands; everything else float32, the weights' gradients too. Opt-in: an approximation "
            "of the float32 step, faster only on CPUs with AVX512-BF16 or AMX-BF16 (a warning "
            "elsewhere); its measured speed and held-out curve: docs/training-speed.md.",
        ),
        click.option(
            "--bf16-output",
            is_flag=True,
            help="The output layer's products (rnnsearch, gnmt, transformer: the logits over the "
            "shortlist and their two gradients) with bfloat16 operands and results; the softmax, "
            "the loss and everything else float32. Opt-in: an approximation, faster only on CPUs "
            "with AVX512-BF16 or AMX-BF16 (a warning elsewhere); with --bf16-steps or alone; "
            "measured: docs/training-speed.md.",
        ),
        click.option(
            "--direction",
            type=click.Choice(DIRECTIONS),
            default="forward",
            show_default=True,
            help=f"forward: p(target | source), the {data}'s own direction; inverse: p(source | "
            f"target), on the same unique pairs read the other way (the network reads the "
            f"target side and predicts the source side; the same held-out pairs), the "
            f"feature of the system's other direction. --source-lang and --target-lang "
            f"still name the {data}'s sides; the model file records the languages as its "
            f"network reads them.",
        ),
        language_option(
            "source",
            f"Language of the {data}'s source side (en), recorded in the model file: "
            "the analysis commands tokenize typed phrases with it.",
        ),
        language_option("target", f"Language of the {data}'s target side (fr), recorded in the model file (--detok)."),
        *loop_options(defaults.loop, inputs),
    ]

    def apply(f: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            f = option(f)
        return f

    return apply
