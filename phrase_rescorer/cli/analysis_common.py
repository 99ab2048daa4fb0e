"""What the analysis commands (``suggest``, ``compare``, ``embed``, ``plot-log``) share: a word
network loaded with its direction said, typed phrases looked up in table form, pictures that need
the plotting libraries, a progress bar counting a stream."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from ..analysis import plots
from ..analysis.table_groups import normalize
from ..data.vocab import Vocabulary
from ..model.architectures import Network
from ..model.checkpoint import Checkpoint, load_checkpoint
from ..moses.words import split_words
from .common import UserError, model_option, resolve_device, say
from .text import TypedPhrases

T = TypeVar("T")
MODEL = model_option()


#: The line each analysis command says about the network's direction (``train --direction``).
DIRECTION_LINES = {
    "forward": "direction: forward, p(target|source): the network reads the table's source phrases "
    "and predicts its targets",
    "inverse": "direction: inverse, p(source|target): the network reads the table's target phrases "
    "and predicts its sources (typed phrases are target phrases; a table's groups are "
    "those of one target)",
}


def load_word_network(path: str, device: str) -> tuple[Checkpoint, Network, Vocabulary, Vocabulary]:
    """The word network of ``path``, after saying its direction on stderr."""
    ctx = click.get_current_context(silent=True)
    ckpt = load_checkpoint(path, f"phrase-rescorer {ctx.info_name if ctx else 'analysis'} -m")
    if ckpt.subwords is not None:
        raise UserError(
            f"{path}: a subword model; suggest, compare and embed read word models only (rescore reads both)"
        )
    if ckpt.right_to_left:
        raise UserError(
            f"{path}: a right-to-left network; suggest, compare and embed read left-to-right ones only "
            "(translate, score and nbest read both)"
        )
    if ctx is not None:
        say(ctx, DIRECTION_LINES[ckpt.direction])
    return ckpt, ckpt.build_model(resolve_device(device)), ckpt.src_vocab, ckpt.tgt_vocab


def looked_up(ctx: click.Context, typed: Iterable[str], reader: TypedPhrases) -> list[tuple[str, str]]:
    """(typed, table form) of each non-blank typed phrase; says the ones that changed."""
    forms = [(p, reader.table_form(p)) for p in typed if split_words(p)]
    for p, form in forms:
        if normalize(p) != form:
            say(ctx, f'looked up "{p}" as "{form}"')
    return [(p, form) for p, form in forms if form]


@contextmanager
def pictures() -> Iterator[None]:
    """Missing plotting libraries become a usage error that says how to install them."""
    try:
        yield
    except plots.PlotsUnavailable as e:
        raise UserError(str(e), e.exit_code) from e


def counted(items: Iterable[T], bar: Any) -> Iterator[T]:
    """``items``, each one ticking ``bar``."""
    for item in items:
        bar.update()
        yield item
