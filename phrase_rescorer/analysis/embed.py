"""Word embeddings and phrase representations for the TensorBoard projector (Figs. 4 and 5).

Each exported space is a pair of TSV files, as the projector reads them (load them at
https://projector.tensorflow.org, or run ``tensorboard --logdir DIR`` on the output folder, whose
``projector_config.pbtxt`` lists them):

* ``NAME.vectors.tsv``: one vector per row, tab-separated numbers, no header;
* ``NAME.metadata.tsv``: one row per vector. Word spaces have a single column (the token, no
  header: the projector's rule for one column); the phrase space has a header row
  ``phrase	words`` and then one row per vector.

Spaces: ``source-words`` and ``target-words`` (rows of ``src_embed`` / ``tgt_embed``: row i is
token id i, special symbols included) and ``phrases``: ``model.representation`` of chosen
source phrases, for cho2014 the summary c, the paper's "phrase representation". :func:`draw_maps` draws them as
t-SNE maps (Figs. 4 and 5). Labels are for people: ``show`` turns a table token or phrase into its
label (``moses.tokenizer.unescape``: ``&apos;s`` -> ``'s``); rows stay one per token id.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..data.batching import sequences_batch
from ..data.vocab import SPECIALS, Vocabulary
from ..model.network import Network, is_summary_network
from ..moses.words import split_words
from ..output import AtomicOutput


@dataclass
class Space:
    name: str  # file stem, e.g. "source-words"
    vectors: np.ndarray  # (N, D)
    labels: list[str]  # N labels (tokens or phrases)
    header: tuple[str, ...] | None = None  # metadata header (multi-column metadata only)
    extra: list[tuple[str, ...]] | None = None  # further metadata columns per row

    @property
    def vectors_file(self) -> str:
        return f"{self.name}.vectors.tsv"

    @property
    def metadata_file(self) -> str:
        return f"{self.name}.metadata.tsv"


def _as_is(text: str) -> str:
    return text


def word_spaces(
    model: Network, src_vocab: Vocabulary, tgt_vocab: Vocabulary, show: Callable[[str], str] = _as_is
) -> list[Space]:
    return [
        Space(
            "source-words", model.src_embed.weight.detach().cpu().float().numpy(), [show(t) for t in src_vocab.tokens]
        ),
        Space(
            "target-words", model.tgt_embed.weight.detach().cpu().float().numpy(), [show(t) for t in tgt_vocab.tokens]
        ),
    ]


REPRESENTATION = {
    "cho2014": "the summary c = tanh(V h_N) of the encoder (the paper's phrase representation)",
    "attention": "the mean of the encoder states over the phrase's positions (its </s> included): "
    "an attention model has no single summary, the decoder reads every state",
}


def representation_kind(model: Network) -> str:
    """Which ``REPRESENTATION`` ``model`` gives: the paper's summary c where it has one."""
    return "cho2014" if is_summary_network(model) else "attention"


@torch.no_grad()
def phrase_representations(
    model: Network, src_vocab: Vocabulary, phrases: Sequence[str], batch_size: int = 256
) -> np.ndarray:
    """One vector per source phrase (N, D): ``REPRESENTATION`` says which, by architecture."""
    device = next(model.parameters()).device
    ids = [src_vocab.encode(split_words(p)) for p in phrases]
    parts = []
    for start in range(0, len(ids), batch_size):
        chunk = ids[start : start + batch_size]
        b = sequences_batch(chunk, [[] for _ in chunk]).to(device)
        parts.append(model.representation(model.encode(b.src, b.src_len)).float().cpu().numpy())
    return np.concatenate(parts) if parts else np.empty((0, model.config.hidden_dim), dtype=np.float32)


def phrase_space(
    model: Network, src_vocab: Vocabulary, phrases: Sequence[str], show: Callable[[str], str] = _as_is
) -> Space:
    phrases = [" ".join(split_words(p)) for p in phrases]
    return Space(
        "phrases",
        phrase_representations(model, src_vocab, phrases),
        [show(p) for p in phrases],
        header=("phrase", "words"),
        extra=[(str(len(p.split(" "))),) for p in phrases],
    )


def _clean(label: str) -> str:
    """A metadata cell: no tab or newline (they would break the TSV); never empty."""
    label = label.replace("\t", " ").replace("\r", " ").replace("\n", " ")
    return label if label.strip() else "<empty>"


def write_space(out_dir: str, space: Space) -> tuple[str, str]:
    """Write the space's vectors and metadata files; return their paths."""
    if len(space.labels) != len(space.vectors):
        raise ValueError(f"{space.name}: {len(space.vectors)} vectors but {len(space.labels)} labels")
    vec_path = os.path.join(out_dir, space.vectors_file)
    meta_path = os.path.join(out_dir, space.metadata_file)
    with AtomicOutput(vec_path) as f:
        for row in space.vectors:
            f.write(("\t".join(f"{v:.6g}" for v in row.tolist()) + "\n").encode())
    with AtomicOutput(meta_path) as f:
        if space.header is not None:
            f.write(("\t".join(space.header) + "\n").encode())
        for i, label in enumerate(space.labels):
            cells = (label, *(space.extra[i] if space.extra else ()))
            f.write(("\t".join(_clean(c) for c in cells) + "\n").encode())
    return vec_path, meta_path


def write_projector_config(out_dir: str, spaces: Sequence[Space]) -> str:
    """``projector_config.pbtxt``, so that ``tensorboard --logdir OUT_DIR`` shows the spaces."""
    path = os.path.join(out_dir, "projector_config.pbtxt")
    with AtomicOutput(path) as f:
        for s in spaces:
            f.write(
                (
                    "embeddings {\n"
                    f'  tensor_name: "{s.name}"\n'
                    f'  tensor_path: "{s.vectors_file}"\n'
                    f'  metadata_path: "{s.metadata_file}"\n'
                    "}\n"
                ).encode()
            )
    return path


def map_path(out_dir: str, space: Space) -> str:
    """Where :func:`draw_maps` draws the map of ``space``."""
    return os.path.join(out_dir, f"{space.name}.tsne.png")


def draw_maps(
    spaces: Sequence[Space],
    out_dir: str,
    max_words: int = 1000,
    max_labels: int = 120,
    perplexity: float = 30.0,
    seed: int = 1,
    on_space: Callable[[str, int], None] | None = None,
) -> list[str]:
    """A t-SNE map per space as ``NAME.tsne.png``: the ``max_words`` most frequent words of a
    word space (special symbols left out; labels for the most frequent), every phrase of the
    phrase space (coloured by length; labels for the shortest). Returns the paths written."""
    from . import plots

    written = []
    for space in spaces:
        if space.name == "phrases":
            order = sorted(range(len(space.labels)), key=lambda i: len(space.labels[i]))
            colors: list[float] | None = [len(space.labels[i].split(" ")) for i in order]
            title = f"phrase representations c, t-SNE ({len(order)} source phrases)"
        else:
            order = list(range(len(SPECIALS), len(space.labels)))[:max_words]  # ids 0-2: the specials
            colors = None
            side = space.name.split("-")[0]
            title = f"{side} word embeddings, t-SNE ({len(order)} most frequent words)"
        if len(order) < 3:
            continue
        if on_space is not None:
            on_space(space.name, len(order))
        points = plots.tsne(space.vectors[order], seed=seed, perplexity=perplexity)
        path = map_path(out_dir, space)
        labels = [space.labels[i] for i in order]
        plots.label_map(points, labels, path, title, max_labels, colors, "words" if colors is not None else None)
        written.append(path)
    return written
