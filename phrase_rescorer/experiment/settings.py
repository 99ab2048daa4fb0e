"""What defines an experiment, and every check made before its first MERT run: the settings
(``Settings``: the ones a restart must share, ``identity``), the target language, the refusal of
a restart whose settings or files changed (``check_resume``, with ``workdir``'s fingerprints),
and the checks of the ini, data and model (``check``)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..analysis.translate import order_ensembles
from ..errors import EXIT_USAGE
from ..lm.lm_file import load_lm
from ..model.checkpoint import load_checkpoint
from ..model.kinds import TAKES, ModelFile, check_kind
from ..moses.ini_weights import features as ini_features
from ..moses.tokenizer import check_language
from ..output import AtomicOutput
from ..reranking.heldout import FOLDS
from ..reranking.merge import MOSES_INDICATOR, REACHED_INDICATOR, added_indicator
from .reranked import CSLM, nmt_feature
from .systems import ExperimentError, check_ini, check_parallel
from .workdir import changed_files, check_out_dir, fingerprints, retimed, with_contents

EventCallback = Callable[[str], None]


@dataclass
class Settings:
    ini: str
    dev: tuple[str, str]  # source, tokenized reference
    test: tuple[str, str]
    out_dir: str
    model: str | None = None
    inverse_model: str | None = None  # a network of the inverse direction: the "+ RNN both directions" row
    lm: str | None = None  # the CSLM: reranked "+ CSLM" systems on every decoder system's runs
    nmt: tuple[str, ...] = ()  # translation networks on sentences, one feature each: reranked "+ NMT" systems
    rerank_nbest: int = 1000
    rerank_optimizer: str = "mert"  # or "kbmira"; may change between starts (the reranked runs redone)
    network_candidates: int = 0  # K: each forward --nmt network's K best join Moses' lists (``candidates``)
    reached_only: bool = False  # ... only those the run's moses.ini can produce (``merge-nbest --reached-only``)
    ensemble_candidates: bool = False  # ... each target order's ensemble's K best instead, a list each
    candidates_moses_nbest: int | None = None  # ... beside Moses' first N of each sentence only (None: all)
    rerank_choose_leave_out: tuple[tuple[str, ...], ...] = ()  # sets of features each reranked run tries without
    test_raw_reference: str | None = None
    unk_feature: bool = False
    runs: int = 3
    max_iterations: int | None = None
    threads: int = 1
    seed: int = 1
    target_lang: str | None = None
    lowercase: bool = False
    nbest: int = 100
    start_weights: str = "moses-defaults"  # or "ini"
    trials: int = 10000
    min_coverage: float = 0.5
    rescore_options: dict = field(default_factory=dict)
    baseline_from: str | None = None  # another experiment's --out whose baseline runs are taken (``borrowed``)

    def identity(self) -> dict:
        """What a restart must share with the first start (not: runs, threads, scoring, and not the
        sentence-level models ``lm`` and ``nmt``, nor ``network_candidates``, ``reached_only``,
        ``ensemble_candidates``, ``candidates_moses_nbest`` and ``rerank_choose_leave_out``: a
        restart may add, replace or drop them, and the reranked rows follow, built on the same
        decoder runs; ``reranked.score_lists``, ``candidates``).
        ``rerank_nbest`` is None while no sentence-level model is given: no list is decoded, and the
        first start that gives one fixes it (``check_resume``)."""
        return {
            "ini": os.path.abspath(self.ini),
            "dev": [os.path.abspath(p) for p in self.dev],
            "test": [os.path.abspath(p) for p in self.test],
            "model": os.path.abspath(self.model) if self.model else None,
            **({"inverse_model": os.path.abspath(self.inverse_model)} if self.inverse_model else {}),
            "rerank_nbest": self.rerank_nbest if self.lm or self.nmt else None,
            "unk_feature": self.unk_feature,
            "max_iterations": self.max_iterations,
            "seed": self.seed,
            "nbest": self.nbest,
            "start_weights": self.start_weights,
            "rescore_options": self.rescore_options,
        }


def write_json(path: str, data: dict) -> None:
    with AtomicOutput(path) as f:
        f.write((json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))


@dataclass(frozen=True)
class Models:
    """The model files of an experiment (the fields of :class:`Settings` that name them), each read
    once before any work (``check_models``); what uses a network or the CSLM builds it from the
    reading (``load_checkpoint``, ``load_lm``), and a restart's checks hash the files themselves."""

    model: ModelFile | None = None
    inverse_model: ModelFile | None = None
    lm: ModelFile | None = None
    nmt: tuple[ModelFile, ...] = ()


def target_lang(settings: Settings, models: Models) -> str:
    """--target-lang, else the language -m's network records (``train --target-lang``)."""
    if settings.target_lang:
        try:
            return check_language(settings.target_lang)
        except ValueError as e:
            raise ExperimentError(f"--target-lang: {e}", EXIT_USAGE) from None
    if models.model:
        ckpt = load_checkpoint(models.model)  # an inverse network reads the table's target language
        recorded = ckpt.source_lang if ckpt.inverse else ckpt.target_lang
        if recorded:
            return recorded
    raise ExperimentError(
        "the target language is unknown (the model file does not record it): give --target-lang, "
        "e.g. --target-lang fr, for the detokenizer",
        EXIT_USAGE,
    )


def describe_model(opened: ModelFile) -> dict:
    """What the report says about the network: its hash, size and training facts."""
    checkpoint = load_checkpoint(opened)
    info = checkpoint.info
    return {
        "fingerprint": checkpoint.fingerprint(),
        "direction": checkpoint.direction,
        "config": checkpoint.config.to_dict(),
        **{k: info[k] for k in ("steps", "best_valid", "unigram_token_ppl", "train_config", "argv") if k in info},
    }


def read_settings(path: str, advice: str = "give another --out, or remove the file to start this one afresh") -> dict:
    """An experiment's ``settings.json``; refused, with ``advice``, when it is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ExperimentError(f"{path}: not an experiment's settings ({e}); {advice}", EXIT_USAGE) from None
    if not isinstance(old, dict):
        raise ExperimentError(
            f"{path}: not an experiment's settings (a JSON {type(old).__name__}, not an object); {advice}", EXIT_USAGE
        )
    return old


def check_resume(settings: Settings, say: EventCallback = lambda _: None) -> None:
    """Record what defines the experiment, or refuse a restart that does not match it: other
    settings, or files that changed since the first start (``workdir.fingerprints``; an ini's
    file whose time alone changed is rehashed, ``workdir.retimed``)."""
    path = os.path.join(settings.out_dir, "settings.json")
    identity = settings.identity()
    prints = fingerprints(
        settings.ini,
        settings.dev,
        settings.test,
        settings.test_raw_reference,
        settings.model,
        inverse_model=settings.inverse_model,
    )
    if not os.path.exists(path):
        write_json(path, {**identity, "fingerprints": with_contents(prints)})
        return
    old = read_settings(path)
    fixes = old.get("rerank_nbest") is None and identity["rerank_nbest"] is not None  # the first start with lists
    if old.get("rerank_nbest") is None or identity["rerank_nbest"] is None:  # no list decoded yet, or none now
        identity["rerank_nbest"] = old.get("rerank_nbest")
    changed = [k for k in identity if old.get(k) != identity[k]]
    if changed:
        details = "; ".join(f"{k}: was {old.get(k)!r}, now {identity[k]!r}" for k in changed)
        raise ExperimentError(
            f"{settings.out_dir} holds an experiment with other settings ({details}); "
            "give another --out, or the same settings to continue it",
            EXIT_USAGE,
        )
    # the size, once the restart is known to be the same experiment
    record = {**old, "rerank_nbest": settings.rerank_nbest} if fixes else old
    if "fingerprints" not in old:  # written before fingerprints were kept: trusted, recorded now
        say(f"{path}: recording the fingerprints of the experiment's files now")
        write_json(path, {**record, "fingerprints": with_contents(prints)})
        return
    names = {
        "ini": settings.ini,
        "dev": settings.dev,
        "test": settings.test,
        "test_raw_reference": settings.test_raw_reference,
        "model": settings.model,
        "inverse_model": settings.inverse_model,
    }
    before = old["fingerprints"] if isinstance(old["fingerprints"], dict) else {}
    if isinstance(before.get("ini_files"), dict) and (moved := retimed(before["ini_files"], prints["ini_files"])):
        before = {**before, "ini_files": {**before["ini_files"], **moved}}
        write_json(path, {**old, "fingerprints": before})
        say(
            f"{', '.join(moved)}: modification time changed since the experiment started, content "
            "unchanged (SHA-256): continued"
        )
    files = changed_files(before, prints, names)
    if files:
        raise ExperimentError(
            f"{settings.out_dir} holds an experiment whose files changed since it started ({', '.join(files)}): "
            "its finished runs, rescored tables and start inis come from the old ones; give another --out, "
            "or restore the files to continue it",
            EXIT_USAGE,
        )
    if fixes:
        write_json(path, {**record, "fingerprints": before})


#: Each model option of the experiment: (field of :class:`Settings`, option of ``kinds.TAKES``).
MODEL_OPTIONS = (
    ("model", "phrase-rescorer experiment -m/--model"),
    ("inverse_model", "phrase-rescorer experiment --inverse-model"),
    ("nmt", "phrase-rescorer experiment --nmt"),
    ("lm", "phrase-rescorer experiment --lm"),
)


def check_models(settings: Settings) -> Models:
    """Every model file given, read once: of the kind and direction its option takes, and a
    network or CSLM this phrase_rescorer reads (exit 4), before any work."""
    opened: dict[str, Any] = {}
    for name, option in MODEL_OPTIONS:
        given = getattr(settings, name)
        families, directions = TAKES[option]
        files = []
        for path in given if isinstance(given, tuple) else filter(None, [given]):
            one = check_kind(path, option, families, directions)
            (load_lm if families == ("cslm",) else load_checkpoint)(one, option)  # its contents checked too
            files.append(one)
        opened[name] = tuple(files) if isinstance(given, tuple) else next(iter(files), None)
    return Models(**opened)


def choosable_features(settings: Settings, lists: int) -> list[str]:
    """The features ``--rerank-choose-leave-out`` may name: those the decoder writes into n-best
    lists (the ini's ``[feature]`` lines but the untuneable ones, ``moses.decoder``: an
    UnknownWordPenalty, or one with ``tuneable=false``), the sentence-level models' (``CSLM0``,
    ``NMT0``, ...) and, with --network-candidates, the joined lists' indicators (``FromNetI`` for
    each of the ``lists`` of candidates: a forward network's, or an order's ensemble's)."""
    with open(settings.ini, encoding="utf-8") as f:
        lines = f.read().splitlines()
    names = [
        f.name for f in ini_features(lines) if f.type != "UnknownWordPenalty" and f.args.get("tuneable") != "false"
    ]
    names += [CSLM[0]] * bool(settings.lm) + [nmt_feature(i)[0] for i in range(len(settings.nmt))]
    if settings.network_candidates:
        names += [MOSES_INDICATOR, REACHED_INDICATOR, *map(added_indicator, range(lists))]
    return names


def check_choices(settings: Settings, lists: int, dev_lines: int) -> None:
    """Every name of --rerank-choose-leave-out one of ``choosable_features``, and a dev set of
    two sentences or more (the held-out halves that choose), else exit 2."""
    known = choosable_features(settings, lists)
    unknown = [name for names in settings.rerank_choose_leave_out for name in names if name not in known]
    if unknown:
        raise ExperimentError(
            f"--rerank-choose-leave-out {', '.join(dict.fromkeys(unknown))}: no reranked list of this experiment has "
            f"such a feature (its features: {' '.join(known)})",
            EXIT_USAGE,
        )
    if dev_lines < FOLDS:
        raise ExperimentError(
            f"--rerank-choose-leave-out: the dev set has {dev_lines:,} sentence; the held-out dev BLEU that chooses "
            f"needs at least {FOLDS}",
            EXIT_USAGE,
        )


def check(settings: Settings) -> tuple[str, Models]:
    """Every refusal that can be made before tuning; returns the phrase table to rescore and the
    model files read."""
    check_out_dir(settings.out_dir)
    models = check_models(settings)
    forward = [m for m in models.nmt if m.kind[1] == "forward"]  # the networks that propose candidates
    first = settings.candidates_moses_nbest
    if first is not None and first > settings.rerank_nbest:
        raise ExperimentError(
            f"--candidates-moses-nbest {first}: Moses' lists hold --rerank-nbest {settings.rerank_nbest}: give at most "
            "that",
            EXIT_USAGE,
        )
    if settings.network_candidates and not forward:
        raise ExperimentError(
            f"--network-candidates: no --nmt network translates forward ({', '.join(settings.nmt) or 'none given'}); "
            "a network of --direction inverse translates the hypothesis into the source: give the forward one",
            EXIT_USAGE,
        )
    lists = len(forward)  # of candidates: one per forward network, or per order's ensemble
    if settings.ensemble_candidates:
        if len(forward) < 2:
            raise ExperimentError(
                f"--ensemble-candidates: {len(forward)} --nmt network translates forward; an ensemble needs two or "
                "more",
                EXIT_USAGE,
            )
        groups = order_ensembles([load_checkpoint(m) for m in forward])  # each one vocabulary, units (else exit 2)
        if len(groups) == len(forward):
            raise ExperimentError(
                "--ensemble-candidates: no two --nmt networks that translate forward write their target in one "
                "order; an ensemble needs two or more of one order",
                EXIT_USAGE,
            )
        lists = len(groups)
    table = check_ini(settings.ini)
    dev_lines = check_parallel("dev", *settings.dev)
    if settings.rerank_choose_leave_out:
        check_choices(settings, lists, dev_lines)
    check_parallel("test", *settings.test, *([settings.test_raw_reference] if settings.test_raw_reference else []))
    if settings.runs < 1:
        raise ExperimentError("--runs must be at least 1", EXIT_USAGE)
    return table, models
