"""An experiment from start to finish: checks, systems, R tuning runs each, scores, report.

Layout of the output directory (everything is kept)::

    .experiment.lock              held by the run in progress (``workdir``: one run at a time)
    settings.json                 what defines the experiment and its files' fingerprints (a
                                  restart must match both)
    experiment.json               the report (rewritten after every finished run)
    tables/phrase-table.rnn.gz    the rescored table(s)
    systems/KEY/start.ini         the starting moses.ini of a system
    systems/KEY/runN/             mert-work/ (mert-moses.pl's directory), mert.out, mert.err,
                                  moses.ini (the tuned weights), dev.1best, test.1best, result.json
    systems/KEY/runN/rerank/      with --lm: the run's n-best lists reranked with the CSLM
                                  (``reranked``: the "+ CSLM" rows); with --nmt the same ("+ NMT"),
                                  and with --network-candidates the lists joined by the networks'
                                  candidates (``candidates``: "+ NMT, with the networks' candidates")
    candidates/                   with --network-candidates: the networks' own n-best lists of dev
                                  and test (``candidates``)
    hybrid/                       with --lm or --nmt, once the runs are done: the bundle of the
                                  reranked system dev chose, for translate-hybrid (``chosen``)

With ``--baseline-from`` the baseline's finished runs are copied from another experiment's
directory, and + RNN's where they are this experiment's own (``borrowed``). A run is finished
when its ``result.json`` exists (written last, atomically); a restarted experiment skips finished
runs and starts unfinished ones afresh, with the same seed. Runs go round the systems (run 1 of
every system, then run 2, ...) so that an experiment stopped early still compares like with like.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import time
from dataclasses import asdict

from ..lm.lm_file import load_lm
from ..moses.toolkit import MosesToolkit
from . import bleu
from .borrowed import borrow_baseline, borrow_network_runs, check_source
from .candidates import made_with, merge_lists, merged_dir, network_lists, takes_candidates, with_candidates
from .chosen import write_chosen
from .moses_runs import decode, tune
from .report import REPORT_NAME, RunScores, build_report
from .reranked import SentenceModels, decoded_list, rerank_dir, rerank_run, reranked, score_lists
from .settings import EventCallback, Models, Settings, check, check_resume, describe_model, target_lang, write_json
from .systems import BASELINE, RNN, System, check_coverage, prepare_system, run_seed, systems_for
from .workdir import locked_out_dir


def _score_run(run_dir: str, settings: Settings, lang: str, refs: dict, kind: str = "1best") -> RunScores:
    """The BLEU scores of a finished run: its 1-best outputs, or (``kind`` "best") the
    hypotheses its reranking chose."""
    with open(os.path.join(run_dir, "result.json"), encoding="utf-8") as f:
        meta = json.load(f)
    dev_out = bleu.read_lines(os.path.join(run_dir, f"dev.{kind}"))
    test_out = bleu.read_lines(os.path.join(run_dir, f"test.{kind}"))
    heldout = os.path.join(run_dir, "dev.heldout")  # a reranked run's (``reranked.rerank_run``)
    return RunScores(
        meta=meta,
        dev=bleu.tokenized_bleu(dev_out, refs["dev"], lowercase=settings.lowercase),
        test=bleu.tokenized_bleu(test_out, refs["test"], lowercase=settings.lowercase),
        test_detok=bleu.detokenized_bleu(test_out, refs["test_raw"], lang, lowercase=settings.lowercase),
        dev_heldout=bleu.tokenized_bleu(bleu.read_lines(heldout), refs["dev"], lowercase=settings.lowercase)
        if kind == "best" and os.path.exists(heldout)
        else None,
    )


def _one_run(
    toolkit: MosesToolkit,
    settings: Settings,
    system: System,
    start_ini: str,
    run: int,
    seed: int,
    say: EventCallback,
    lists: int = 0,
) -> None:
    """Tune one MERT run of ``system`` and decode dev and test with its weights; ``lists``: the
    same decoding writes the distinct n-best lists of that size that the run's reranking takes."""
    run_dir = os.path.join(settings.out_dir, "systems", system.key, f"run{run}")
    os.makedirs(run_dir, exist_ok=True)
    t0 = time.time()

    def iteration(n: int, dev_bleu: float | None) -> None:
        if dev_bleu is None:
            say(f"{system.key} run {run}: MERT iteration {n} decoding the dev set")
        else:
            say(f"{system.key} run {run}: MERT iteration {n} done, dev BLEU {dev_bleu:.2f} ({time.time() - t0:.0f} s)")

    tuned, bleus = tune(
        toolkit,
        start_ini,
        *settings.dev,
        run_dir,
        seed=seed,
        threads=settings.threads,
        max_iterations=settings.max_iterations,
        nbest=settings.nbest,
        on_iteration=iteration,
    )
    shutil.copyfile(tuned, os.path.join(run_dir, "moses.ini"))
    t1 = time.time()
    if lists:
        os.makedirs(rerank_dir(run_dir), exist_ok=True)
        say(f"{system.key} run {run}: decoding dev and test with the tuned weights, 1-best and {lists}-best lists")
    else:
        say(f"{system.key} run {run}: decoding dev and test with the tuned weights")
    for part, (source, _reference) in (("dev", settings.dev), ("test", settings.test)):
        nbest = (decoded_list(run_dir, part, lists), lists) if lists else None
        decode(toolkit, tuned, source, os.path.join(run_dir, f"{part}.1best"), threads=settings.threads, nbest=nbest)
    write_json(
        os.path.join(run_dir, "result.json"),
        {
            "system": system.key,
            "run": run,
            "seed": seed,
            "mert_dev_bleu": [round(b, 2) for b in bleus],
            "iterations": len(bleus),
            "tune_seconds": round(t1 - t0, 1),
            "decode_seconds": round(time.time() - t1, 1),
        },
    )


def _prefixed(say: EventCallback, where: str) -> EventCallback:
    return lambda message: say(f"{where}: {message}")


def run_experiment(
    toolkit: MosesToolkit, settings: Settings, say: EventCallback = lambda _: None, warn: EventCallback | None = None
) -> dict:
    """Run (or continue) the experiment; return the report (also in ``out_dir/experiment.json``).
    ``say``: progress; ``warn``: what the user must hear (no bundle of the chosen system) [default: say]."""
    table, opened = check(settings)
    lang = target_lang(settings, opened)
    with locked_out_dir(settings.out_dir):  # one run at a time in a directory
        return _run_locked(toolkit, settings, opened, table, lang, say, say if warn is None else warn)


def _run_locked(
    toolkit: MosesToolkit,
    settings: Settings,
    opened: Models,
    table: str,
    lang: str,
    say: EventCallback,
    warn: EventCallback,
) -> dict:
    if settings.baseline_from:
        check_source(settings, settings.baseline_from)
    check_resume(settings, say)
    for network in filter(None, (opened.model, opened.inverse_model)):
        src, tgt = check_coverage(table, network, settings.min_coverage)
        say(
            f"{network.path}: vocabulary covers {src:.1%} of the table's source tokens and {tgt:.1%} of its "
            "target tokens"
        )
    decoders = systems_for(settings.model is not None, settings.unk_feature, settings.inverse_model is not None)
    models = SentenceModels(opened.lm, opened.nmt)
    combinations = models.combinations()
    fingerprints = models.fingerprints()
    rerankers = [[reranked(s, features) for features in combinations] for s in decoders]
    systems = decoders + [r for features in range(len(combinations)) for r in (group[features] for group in rerankers)]
    # --network-candidates: a twin of each reranked system with the networks' features (``candidates``)
    hybrid = [i for i, f in enumerate(combinations) if settings.network_candidates and takes_candidates(f)]

    def start_ini(system: System) -> str:
        return prepare_system(
            system,
            settings.ini,
            table,
            opened.model,
            settings.out_dir,
            start_weights=settings.start_weights,
            rescore_options=settings.rescore_options,
            on_progress=say,
            inverse_model=opened.inverse_model,
        )

    # the baseline first (copied runs are checked against its start before any rescoring), then
    # the wider systems: + RNN's table is cut from theirs (``prepare_system``)
    starts = {BASELINE.key: start_ini(BASELINE)}
    if settings.baseline_from:
        borrow_baseline(settings, settings.baseline_from, starts[BASELINE.key], say)
    starts.update({s.key: start_ini(s) for s in sorted(decoders[1:], key=lambda s: -s.columns)})
    if settings.baseline_from and RNN in decoders:
        borrow_network_runs(settings, settings.baseline_from, decoders.index(RNN), starts[RNN.key], say)
    refs = {"dev": bleu.read_lines(settings.dev[1]), "test": bleu.read_lines(settings.test[1])}
    refs["test_raw"] = (
        bleu.read_lines(settings.test_raw_reference)
        if settings.test_raw_reference
        else bleu.detokenize(refs["test"], lang)
    )
    described = {**asdict(settings), "target_lang": lang, "moses": toolkit.root}
    for key, given in (("network", opened.model), ("inverse_network", opened.inverse_model)):
        described.update({key: describe_model(given)} if given else {})
    if opened.lm:
        described["cslm"] = {k: v for k, v in load_lm(opened.lm).info.items() if k != "argv"}
    if opened.nmt:  # one description per network, in the order of their features NMT0, NMT1, ...
        described["nmt"] = [describe_model(network) for network in opened.nmt]

    networks = (  # decoded before the first MERT run: a network that cannot translate stops it first
        network_lists(
            settings.out_dir,
            models,
            {"dev": settings.dev[0], "test": settings.test[0]},
            size=settings.network_candidates,
            fingerprints=fingerprints,
            say=say,
            ensemble=settings.ensemble_candidates,
        )
        if hybrid
        else []
    )
    twin = functools.partial(
        with_candidates,
        reached_only=settings.reached_only,
        ensemble=settings.ensemble_candidates,
        moses_nbest=settings.candidates_moses_nbest,
        orders=len(networks),
    )
    systems += [twin(group[i]) for i in hybrid for group in rerankers]
    scores: dict[str, list[RunScores]] = {s.key: [] for s in systems}

    def report() -> dict:
        data = build_report(
            systems,
            scores,
            settings_json=described,
            raw_reference=settings.test_raw_reference is not None,
            trials=settings.trials,
            seed=settings.seed,
        )
        write_json(os.path.join(settings.out_dir, REPORT_NAME), data)
        return data

    # rerank_run with what every reranked run is given beside its decoder run's own
    rerank = functools.partial(
        rerank_run,
        nbest=settings.rerank_nbest,
        optimizer=settings.rerank_optimizer,
        threads=settings.threads,
        fingerprints=fingerprints,
        choose=settings.rerank_choose_leave_out,
        choose_bleu=lambda lines, refs: bleu.tokenized_bleu(lines, refs, lowercase=settings.lowercase).score,
    )
    for run in range(1, settings.runs + 1):
        for index, system in enumerate(decoders):
            run_dir = os.path.join(settings.out_dir, "systems", system.key, f"run{run}")
            seed = run_seed(settings.seed, index, run)
            if os.path.exists(os.path.join(run_dir, "result.json")):
                say(f"{system.key} run {run}: finished earlier, kept")
            else:
                shutil.rmtree(rerank_dir(run_dir), ignore_errors=True)  # built on the run redone now
                lists = settings.rerank_nbest if combinations else 0
                _one_run(toolkit, settings, system, starts[system.key], run, seed, say, lists)
            scores[system.key].append(_score_run(run_dir, settings, lang, refs))
            report()
            if not combinations:
                continue
            seconds = score_lists(
                toolkit,
                run_dir,
                models,
                settings.dev,
                settings.test,
                nbest=settings.rerank_nbest,
                threads=settings.threads,
                fingerprints=fingerprints,
                say=_prefixed(say, f"{system.key} run {run}"),
            )
            for features, reranker in zip(combinations, rerankers[index], strict=True):
                rerank(
                    toolkit,
                    run_dir,
                    reranker,
                    features,
                    models.features(),
                    settings.dev,
                    settings.test,
                    seed=seed,
                    score_seconds=seconds,
                    say=_prefixed(say, f"{reranker.key} run {run}"),
                )
                scores[reranker.key].append(
                    _score_run(os.path.join(rerank_dir(run_dir), reranker.key), settings, lang, refs, kind="best")
                )
                report()
            if not hybrid:
                continue
            seconds += merge_lists(
                run_dir,
                models,
                networks,
                settings.dev,
                settings.test,
                toolkit=toolkit,
                fingerprints=fingerprints,
                size=settings.network_candidates,
                say=_prefixed(say, f"{system.key} run {run}"),
                threads=settings.threads,
                reached_only=settings.reached_only,
                ensemble=settings.ensemble_candidates,
                moses_nbest=settings.candidates_moses_nbest,
            )
            for i in hybrid:
                paired = twin(rerankers[index][i])
                rerank(
                    toolkit,
                    run_dir,
                    paired,
                    combinations[i],
                    models.features(),
                    settings.dev,
                    settings.test,
                    seed=seed,
                    score_seconds=seconds,
                    say=_prefixed(say, f"{paired.key} run {run}"),
                    lists_dir=merged_dir(run_dir),
                    made_with=made_with(
                        settings.network_candidates,
                        reached_only=settings.reached_only,
                        ensemble=settings.ensemble_candidates,
                        moses_nbest=settings.candidates_moses_nbest,
                    ),
                )
                scores[paired.key].append(
                    _score_run(os.path.join(rerank_dir(run_dir), paired.key), settings, lang, refs, kind="best")
                )
                report()
    final = report()
    # the reranked systems, then their twins: the first among equals is the cheaper
    plain = [(group[i], combinations[i], False) for i in range(len(combinations)) for group in rerankers]
    twins = [(twin(group[i]), combinations[i], True) for i in hybrid for group in rerankers]
    write_chosen(
        toolkit,
        settings.out_dir,
        final,
        plain + twins,
        models,
        nbest=settings.rerank_nbest,
        candidates=settings.network_candidates,
        reached_only=settings.reached_only,
        ensemble=settings.ensemble_candidates,
        moses_nbest=settings.candidates_moses_nbest,
        say=say,
        warn=warn,
    )
    return final
