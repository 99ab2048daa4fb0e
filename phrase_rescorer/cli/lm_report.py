"""What ``train-lm`` prints once its network is trained: the held-out perplexity of the best
network, the test text's, and KenLM's on the same texts when ``--kenlm`` names an n-gram LM."""

from __future__ import annotations

from collections.abc import Sequence

import click

from ..data.corpus import read_sentences
from ..lm.kenlm import KenLMError, query_perplexity
from ..lm.lm_file import load_lm
from ..lm.perplexity import perplexity
from ..lm.text import text_ngrams
from ..lm.trainer import LMTrainer, last_path
from ..training.log import EventLog
from .common import UserError, say


def report_training(
    ctx: click.Context,
    trainer: LMTrainer,
    reason: str,
    *,
    valid_sentences: Sequence[list[str]],
    test_path: str | None,
    kenlm: tuple[str, str] | None,
    log_path: str | None = None,
) -> None:
    """Say why training stopped and the perplexities of the best network (written to the
    trainer's model path); ``kenlm`` is (KenLM's ``query`` program, the n-gram LM file), whose
    held-out perplexity is also appended to the training log ``log_path`` (``plot-log`` draws it)."""
    best = trainer.info.get("valid", {})
    say(ctx, f"stopped ({reason}) after {trainer.state.step:,} steps, {trainer.state.epoch} epochs")
    nan = float("nan")
    say(
        ctx,
        f"held-out perplexity (best, step {trainer.info.get('steps', 0):,}): CSLM "
        f"{best.get('ppl', nan):.2f} over {best.get('tokens', 0) - best.get('oovs', 0):,} tokens, "
        f"{best.get('oovs', 0):,} OOVs left out ({best.get('ppl_with_unk', nan):.2f} with OOVs scored as <unk>)",
    )
    evaluated: list[tuple[str, Sequence[list[str]]]] = [("held-out", valid_sentences)]
    if test_path is not None:
        test_sentences = list(read_sentences(test_path))
        best_net = load_lm(trainer.model_path).build(trainer.device)
        figures = perplexity(best_net, *text_ngrams(best_net.config.order, trainer.vocab, test_sentences))
        say(
            ctx,
            f"{test_path}: CSLM perplexity {figures.ppl:.2f} over {figures.tokens - figures.oovs:,} tokens, "
            f"{figures.oovs:,} OOVs left out ({figures.ppl_with_unk:.2f} with OOVs scored as <unk>)",
        )
        evaluated.append((test_path, test_sentences))
    if kenlm is not None:
        query, lm_path = kenlm
        for name, texts in evaluated:
            try:
                k = query_perplexity(query, lm_path, "".join(" ".join(s) + "\n" for s in texts))
            except KenLMError as e:
                raise UserError(str(e), e.exit_code) from e
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
                            "step": trainer.state.step,
                            "epoch": trainer.state.epoch,
                            "text": name,
                            "kenlm_ppl": k.ppl,
                            "kenlm_ppl_with_oovs": k.ppl_with_oovs,
                            "lm": lm_path,
                        }
                    )
    say(ctx, f"wrote {trainer.model_path} (best), {last_path(trainer.model_path)} (latest, for --resume)")
