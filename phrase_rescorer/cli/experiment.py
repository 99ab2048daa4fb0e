"""``experiment``: baseline vs + RNN (vs + RNN + WP), each tuned several times with MERT."""

from __future__ import annotations

import os
import time

import click

from ..errors import EXIT_SIGINT, Terminated, signal_words
from ..experiment import ExperimentError, Settings, run_experiment
from ..experiment.report import format_table
from ..moses.columns import START_WEIGHT
from ..moses.ini_weights import DEFAULT_WEIGHTS
from ..moses.toolkit import EXPERIMENT_NEEDS, MosesNotFound, find_moses
from ..reranking.mert import OPTIMIZERS
from . import cli
from .common import (
    InputPath,
    UserError,
    device_option,
    feature_names,
    is_quiet,
    model_option,
    threads_value_option,
    warn,
)

_FILE = InputPath(dir_okay=False)


@cli.command("experiment")
@click.option(
    "--moses",
    "moses_dir",
    type=click.Path(file_okay=False),
    envvar="MOSES",
    show_envvar=True,
    help="The Moses directory (bin/moses, bin/mert, scripts/training/mert-moses.pl). Default: $MOSES.",
)
@click.option(
    "--ini",
    required=True,
    type=_FILE,
    help="The baseline moses.ini (absolute paths; its TranslationModel0 a text phrase table).",
)
@click.option(
    "--dev",
    nargs=2,
    required=True,
    type=_FILE,
    metavar="SRC REF",
    help="Tuning set: source and reference, tokenized and cased like the table.",
)
@click.option(
    "--test", nargs=2, required=True, type=_FILE, metavar="SRC REF", help="Test set: source and tokenized reference."
)
@click.option(
    "--test-raw-ref",
    type=_FILE,
    default=None,
    help="The test reference as running text, for the detokenized score (sacrebleu's standard). "
    "Default: the tokenized reference, detokenized like the output.",
)
@model_option(required=False)
@click.option(
    "--inverse-model",
    type=_FILE,
    default=None,
    help="A network of the other direction (train --direction inverse, p(source|target)): adds "
    "the \"+ RNN both directions\" system, the table with -m's column then this one's.",
)
@click.option(
    "--lm",
    "lm",
    type=_FILE,
    default=None,
    help="The CSLM (train-lm): adds the paper's reranked rows, \"+ CSLM\" on the baseline's runs, "
    "\"+ CSLM + RNN\" (and + WP) on the others': each run's dev and test n-best lists get the "
    "CSLM feature, the reranking weights are tuned on dev with mert, test is reranked. May be "
    "added or changed when an experiment is continued: its MERT runs are kept.",
)
@click.option(
    "--nmt",
    "nmt",
    type=_FILE,
    multiple=True,
    help='A translation network trained on sentence pairs (train-nmt): adds "+ NMT" rows built '
    'like the CSLM\'s (the feature ln p(hypothesis | source)); with --lm also "+ CSLM + NMT" '
    "(and + RNN ones). Repeat for several networks, one feature each (NMT0, NMT1, ...) in the "
    "same rows: e.g. a forward network and an inverse one (train-nmt --direction inverse, "
    "ln p(source | hypothesis)). Like --lm, may be added or changed when an experiment is continued.",
)
@click.option(
    "--rerank-nbest",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Size of the distinct n-best lists reranked with --lm or --nmt.",
)
@click.option(
    "--network-candidates",
    type=click.IntRange(min=1),
    default=None,
    metavar="K",
    help="With --nmt: each network that translates forward also translates dev and test with its own "
    "beam (beam K, translate's defaults otherwise), once per experiment, and its K best candidates join "
    "every run's Moses lists (as merge-nbest --ini: FromMoses, FromNet0, ..., MosesReached; a new line "
    "gets Moses' own features by constrained decoding where the run's ini can produce it, else "
    'WordPenalty0 and the ini\'s KENLM feature through $MOSES/bin/query and 0): every "+ NMT" row gets '
    'a twin "+ NMT, with the networks\' candidates", reranked on the joined lists (tune them with '
    "--rerank-optimizer mert, the default: kbmira measured below Moses' lists alone on them). May be "
    "added or changed when an experiment is continued, like --nmt.",
)
@click.option(
    "--reached-only",
    is_flag=True,
    help="With --network-candidates: keep only the candidates the run's moses.ini can produce (as merge-nbest "
    '--reached-only): the twin is "+ NMT, with the networks\' candidates Moses can produce", tuned well by kbmira. '
    "May be added or dropped when an experiment is continued.",
)
@click.option(
    "--ensemble-candidates",
    is_flag=True,
    help="With --network-candidates: the --nmt networks that translate forward (two or more, of one vocabulary "
    "and units) translate as one ensemble (translate -m A -m B), and its K best join Moses' lists as one "
    "list (FromNet0): the twin is \"+ NMT, with the networks' ensemble's candidates\"; networks of both target "
    'orders (train-nmt --right-to-left): one ensemble per order, a list each (FromNet0, FromNet1), "... with each '
    "target order's ensemble's candidates\". OUT/hybrid records it (bundle --ensemble). May be added or dropped "
    "when an experiment is continued.",
)
@click.option(
    "--candidates-moses-nbest",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="With --network-candidates: the candidates join only the first N distinct hypotheses of each sentence "
    "of Moses' --rerank-nbest lists (as merge-nbest --moses-nbest): the twin reranks Moses' N best and the "
    "candidates, the row it twins Moses' --rerank-nbest; OUT/hybrid records it (bundle --moses-nbest) "
    "[default: all]. May be added, changed or dropped when an experiment is continued.",
)
@click.option(
    "--rerank-choose-leave-out",
    "rerank_choose_leave_out",
    multiple=True,
    metavar="FEATURES",
    help="With --lm or --nmt: a set of features (names separated by commas) each reranked run also tries "
    "leaving out; repeat for more sets. Every run computes the held-out dev BLEU of its list without "
    "each set (the set's features its list has) and with every feature, and tunes the highest (rerank-tune "
    "--choose-leave-out; the weights give the left-out features 0). E.g. --rerank-choose-leave-out "
    "TranslationModel0,LexicalReordering0,Distortion0,PhrasePenalty0. May be added, changed or dropped "
    "when an experiment is continued: the reranked runs whose sets changed are tuned again, nothing else.",
)
@click.option(
    "--rerank-optimizer",
    type=click.Choice(OPTIMIZERS),
    default=OPTIMIZERS[0],
    show_default=True,
    help="Moses' optimiser of the reranking weights on the dev lists (rerank-tune --optimizer). "
    "May be changed when an experiment is continued: the reranked runs are tuned again, nothing else.",
)
@click.option("--unk-feature", is_flag=True, help="Add the paper's + WP system (RNN column and unknown-word count).")
@click.option(
    "--runs",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="MERT runs per system, each with its own working directory and seed.",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Directory for everything (tuned inis, 1-best outputs, experiment.json). "
    "Rerun the same command to continue an interrupted experiment (refused if the ini, "
    "data or model changed since it started). One run at a time per directory.",
)
@click.option(
    "--baseline-from",
    type=InputPath(file_okay=False),
    default=None,
    help="Another experiment's --out whose finished baseline runs are copied instead of tuned "
    "again: a new network against the same baseline. Refused unless that experiment had the "
    "same ini, dev and test files (unchanged), seed, --nbest, --start-weights and "
    "--maximum-iterations. Its + RNN runs are copied too where -m is the same network and its "
    "rescored table the same text (an --inverse-model added to that experiment's), else tuned.",
)
@click.option(
    "--maximum-iterations",
    type=click.IntRange(min=1),
    default=None,
    help="mert-moses.pl's iteration cap (its default: 25).",
)
@click.option("--nbest", type=click.IntRange(min=1), default=100, show_default=True, help="n-best list size for MERT.")
@threads_value_option(
    "Threads of the decoder (Moses' -threads) and of the network while it rescores the table: "
    "a number or 'all'  [default: 1, or OMP_NUM_THREADS when set]."
)
@click.option(
    "--seed",
    type=int,
    default=1,
    show_default=True,
    help="Base of the MERT seeds (run r of system s gets seed + 1000·s + r).",
)
@click.option(
    "--target-lang",
    default=None,
    help="Target language for the detokenizer (e.g. fr). Default: the one the model file records.",
)
@click.option("--lowercase", "--lc", "lowercase", is_flag=True, help="Case-insensitive BLEU (sacrebleu -lc).")
@click.option(
    "--start-weights",
    type=click.Choice(["moses-defaults", "ini"]),
    default="moses-defaults",
    show_default=True,
    help="Where every system's MERT starts: train-model.perl's starting weights "
    f"({DEFAULT_WEIGHTS['PhraseDictionary']} for each added column, as for every phrase-table score), "
    f"or the ini's own weights with {START_WEIGHT} for each added column (moses-ini's and "
    "moses-step's starting weight: the scale of a tuned ini).",
)
@click.option(
    "--trials",
    type=click.IntRange(min=100),
    default=10000,
    show_default=True,
    help="Approximate-randomization trials (the bootstrap draws a tenth as many samples).",
)
@click.option(
    "--min-coverage",
    type=click.FloatRange(0, 1),
    default=0.5,
    show_default=True,
    help="Refuse a model whose shortlists cover less of the table's tokens (either side).",
)
@device_option
@click.pass_context
def experiment(
    ctx: click.Context,
    moses_dir: str | None,
    ini: str,
    dev: tuple[str, str],
    test: tuple[str, str],
    test_raw_ref: str | None,
    model: str | None,
    inverse_model: str | None,
    lm: str | None,
    nmt: tuple[str, ...],
    rerank_nbest: int,
    network_candidates: int | None,
    reached_only: bool,
    ensemble_candidates: bool,
    candidates_moses_nbest: int | None,
    rerank_choose_leave_out: tuple[str, ...],
    rerank_optimizer: str,
    unk_feature: bool,
    runs: int,
    out_dir: str,
    baseline_from: str | None,
    maximum_iterations: int | None,
    nbest: int,
    threads: int,
    seed: int,
    target_lang: str | None,
    lowercase: bool,
    start_weights: str,
    trials: int,
    min_coverage: float,
    device: str,
) -> None:
    """Does the RNN column help this Moses system? Tune the baseline and the baseline + the
    network's column (and + WP) RUNS times each with mert-moses.pl, decode the test set with
    every tuned ini, and compare BLEU with a significance test over test sentences and runs.

    Without -m/--model only the baseline is tuned (to measure MERT's own spread). With --lm
    (a CSLM from train-lm) every tuned run is also reranked: the paper's "+ CSLM + RNN" rows,
    and "+ CSLM" on the baseline, which says whether the two networks add up. With --nmt (a
    network from train-nmt; repeat it for several, one feature each) the same for its
    sentence-level feature: "+ NMT", and with --lm "+ CSLM + NMT" (and "+ CSLM + RNN + NMT"),
    rows beyond the paper's table; with --network-candidates K also each "+ NMT" row reranked on
    Moses' lists joined by the networks' own K best translations (the hybrid). With
    --inverse-model (a network trained with --direction inverse) also "+ RNN both directions":
    the table with both networks' columns, as Moses carries each probability both ways.

    \b
    Prints a table like the paper's Table 1 (mean ± sd over runs, Δ vs the baseline, p) and
    writes everything to --out. Progress: one line per MERT iteration on stderr.
    \b
    Example:
      phrase-rescorer experiment --moses $MOSES --ini work/model/moses.ini \\
          --dev dev.en dev.fr --test test.en test.fr --model rnn.pt --runs 3 --out exp/
    """
    if network_candidates and not nmt:
        raise UserError("--network-candidates needs --nmt (the networks whose candidates join Moses' lists)")
    if reached_only and not network_candidates:
        raise UserError("--reached-only needs --network-candidates (it keeps the candidates Moses can produce)")
    if ensemble_candidates and not network_candidates:
        raise UserError("--ensemble-candidates needs --network-candidates (the ensemble's K best join Moses' lists)")
    if candidates_moses_nbest is not None and not network_candidates:
        raise UserError(
            "--candidates-moses-nbest needs --network-candidates (it says how many of Moses' hypotheses they join)"
        )
    if rerank_choose_leave_out and not (nmt or lm):
        raise UserError("--rerank-choose-leave-out needs --lm or --nmt (the reranked runs that choose)")
    option = "--rerank-choose-leave-out"
    choices = tuple(tuple(feature_names((value,), option)) for value in rerank_choose_leave_out)
    try:
        query = ("bin/query",) if network_candidates else ()
        toolkit = find_moses(moses_dir, needs=(*EXPERIMENT_NEEDS, f"bin/{rerank_optimizer}", *query))
    except MosesNotFound as e:
        raise UserError(str(e), e.exit_code) from None
    if unk_feature and model is None:
        raise UserError("--unk-feature needs --model")
    if len(set(map(os.path.abspath, nmt))) != len(nmt):
        raise UserError("--nmt given the same file twice: give each network once")
    if inverse_model and model is None:
        raise UserError("--inverse-model needs --model (the system of both directions adds both columns)")
    settings = Settings(
        ini=ini,
        dev=dev,
        test=test,
        out_dir=out_dir,
        model=model,
        inverse_model=inverse_model,
        lm=lm,
        nmt=nmt,
        rerank_nbest=rerank_nbest,
        rerank_optimizer=rerank_optimizer,
        network_candidates=network_candidates or 0,
        reached_only=reached_only,
        ensemble_candidates=ensemble_candidates,
        candidates_moses_nbest=candidates_moses_nbest,
        rerank_choose_leave_out=choices,
        test_raw_reference=test_raw_ref,
        unk_feature=unk_feature,
        runs=runs,
        max_iterations=maximum_iterations,
        threads=threads,
        seed=seed,
        target_lang=target_lang,
        lowercase=lowercase,
        nbest=nbest,
        start_weights=start_weights,
        trials=trials,
        min_coverage=min_coverage,
        rescore_options={"device": device},
        baseline_from=os.path.abspath(baseline_from) if baseline_from else None,
    )
    quiet = is_quiet(ctx)

    def say(message: str) -> None:
        if not quiet:
            click.echo(f"[{time.strftime('%H:%M:%S')}] {message}", err=True)

    resume = f"the finished runs are kept in {out_dir}: run the same command to continue"
    try:
        report = run_experiment(toolkit, settings, say, warn)
    except ExperimentError as e:
        raise UserError(str(e), e.exit_code) from None
    except KeyboardInterrupt:
        raise UserError(f"interrupted; {resume}", EXIT_SIGINT) from None
    except Terminated as e:  # SIGTERM or SIGHUP
        raise UserError(f"{signal_words(e.signum)}; {resume}", e.exit_code) from None
    click.echo(format_table(report))
