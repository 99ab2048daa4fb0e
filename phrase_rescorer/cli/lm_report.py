"""What ``train-lm`` reports once its network is trained: the held-out perplexity of the best
network, the test text's, and KenLM's on the --valid and --test texts when ``--kenlm`` names an
n-gram LM (measured before training, so that a file that is not an LM is refused first)."""

from __future__ import annotations

import click

from ..data.corpus import read_sentences
from ..lm.kenlm import KenLMError, KenLMPerplexity, query_perplexity
from ..lm.lm_file import load_lm
from ..lm.perplexity import perplexity
from ..lm.text import text_ngrams
from ..moses.toolkit import MosesNotFound, find_moses
from ..training.log import EventLog
from ..training.run_files import companion_path
from ..training.task_interface import RunState
from .common import UserError, say


def kenlm_perplexities(
    moses_dir: str | None, lm_path: str, texts: dict[str, str | None]
) -> list[tuple[str, KenLMPerplexity]]:
    """KenLM's figures on each given text of ``texts`` (label -> path): (label, figures). The
    n-gram LM was estimated on the training text, so the 1 % held out of it is no held-out text
    for KenLM: without --valid or --test there is nothing to compare on."""
    given = [(label, path) for label, path in texts.items() if path is not None]
    if not given:
        raise UserError(
            "--kenlm compares on the --valid or --test text: the n-gram LM was estimated on TEXT, "
            "the 1% held out of it included; give --valid or --test"
        )
    try:
        query = find_moses(moses_dir, needs=("bin/query",)).path("bin/query")
    except MosesNotFound as e:
        raise UserError(f"--kenlm: {e}", e.exit_code) from e
    figures = []
    for label, path in given:
        lines = "".join(" ".join(s) + "\n" for s in read_sentences(path))
        try:
            figures.append((label, query_perplexity(query, lm_path, lines)))
        except KenLMError as e:
            raise UserError(f"--kenlm: {e}", e.exit_code) from e
    return figures


def report_training(
    ctx: click.Context,
    model_out: str,
    reason: str,
    p: RunState,
    *,
    test: tuple[str | None, list[list[str]] | None],
    kenlm: tuple[str, list[tuple[str, KenLMPerplexity]]] | None,
    log_path: str | None = None,
) -> None:
    """Say why training stopped and the perplexities of the best network (in ``model_out``);
    KenLM's held-out perplexity is also appended to the training log ``log_path`` (``plot-log``
    draws it beside the CSLM's)."""
    best = p.best or {}
    say(ctx, f"stopped ({reason}) after {p.step:,} steps, {p.epoch} epochs")
    nan = float("nan")
    say(
        ctx,
        f"held-out perplexity (best, step {best.get('step', 0):,}): CSLM "
        f"{best.get('ppl', nan):.2f} over {best.get('tokens', 0) - best.get('oovs', 0):,} tokens, "
        f"{best.get('oovs', 0):,} OOVs left out ({best.get('ppl_with_unk', nan):.2f} with OOVs scored as <unk>)",
    )
    test_path, test_sentences = test
    if test_path is not None and test_sentences is not None:
        best_file = load_lm(model_out)
        net = best_file.build()
        figures = perplexity(net, *text_ngrams(net.config.order, best_file.vocab, test_sentences))
        say(
            ctx,
            f"{test_path}: CSLM perplexity {figures.ppl:.2f} over {figures.tokens - figures.oovs:,} tokens, "
            f"{figures.oovs:,} OOVs left out ({figures.ppl_with_unk:.2f} with OOVs scored as <unk>)",
        )
    if kenlm is not None:
        lm_path, figures_of = kenlm
        for name, k in figures_of:
            say(
                ctx,
                f"{name}: KenLM {lm_path} perplexity {k.ppl:.2f} over {k.tokens - k.oovs:,} tokens, "
                f"{k.oovs:,} OOVs left out ({k.ppl_with_oovs:.2f} with OOVs)",
            )
            if name == "held-out" and log_path is not None:
                with EventLog(log_path, append=True) as log:
                    log.write(
                        {
                            "event": "kenlm",
                            "step": p.step,
                            "epoch": p.epoch,
                            "text": name,
                            "kenlm_ppl": k.ppl,
                            "kenlm_ppl_with_oovs": k.ppl_with_oovs,
                            "lm": lm_path,
                        }
                    )
        say(
            ctx,
            "KenLM compared on --valid and --test only (its figures are held-out ones where "
            "the n-gram LM was not estimated on those texts), never on the 1% held out of TEXT",
        )
    say(ctx, f"wrote {model_out} (best), {companion_path(model_out, '.last.pt')} (latest, for --resume)")
