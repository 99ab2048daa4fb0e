"""Finished MERT runs taken from another experiment (``experiment --baseline-from DIR``).

The baseline system depends on neither network: its runs are the same whichever ``-m`` an
experiment compares, when the ini, the dev and test sets, the seed (run r of the baseline has
seed + r, ``systems.run_seed``), the n-best size, the starting weights and the iteration cap are
the same. An experiment with a new network can then take the baseline's finished runs from an
earlier one instead of tuning them again (about a quarter of an hour of MERT each on the
bundled en→fr system). The other experiment's ``settings.json`` must record those settings and
the same fingerprints of the ini, its files and the dev and test sets (``workdir``), and its
baseline must have started MERT from the same ``start.ini``, byte for byte; anything else is
refused before any table is rescored, naming the difference.

``+ RNN``'s runs are taken too where tuning them here would repeat them (``network_runs``: the
same network, the same start but for its table's path, the rescored table the same text; the
seeds checked here): the case of an experiment that adds the inverse network
(``--inverse-model``) to an earlier one's, which then tunes only ``+ RNN both directions``.
Anything else (a new network, above all; their files unreadable too) is no refusal: ``+ RNN``
is tuned here, and the log says why.

A run is copied whole into ``--out`` (its reranked lists, which depend on the sentence-level
models, are left behind and built again when asked for), its ``result.json`` recording where it
came from (``borrowed_from``, shown with the run in ``experiment.json``): first under a
temporary name, then renamed, so an interruption leaves either no run or a finished one.
"""

from __future__ import annotations

import json
import os
import shutil
import stat

from ..errors import EXIT_OS, EXIT_USAGE
from .network_runs import network_difference, repoint_table
from .settings import EventCallback, Settings, read_settings, write_json
from .systems import BASELINE, RNN, ExperimentError, System, run_seed
from .workdir import changed_files, fingerprints, retimed

#: The settings the baseline's runs depend on (``Settings.identity``'s keys).
BASELINE_SETTINGS = ("ini", "dev", "test", "seed", "nbest", "start_weights", "max_iterations")
#: The fingerprints of the files they read (``workdir.fingerprints``' keys).
BASELINE_FILES = ("ini", "ini_files", "dev", "test")


def check_source(settings: Settings, source: str) -> dict:
    """Refuse a ``--baseline-from`` whose baseline is not this experiment's; return its settings."""
    if os.path.exists(settings.out_dir) and os.path.exists(source) and os.path.samefile(source, settings.out_dir):
        raise ExperimentError(f"--baseline-from {source}: that is --out itself", EXIT_USAGE)
    path = os.path.join(source, "settings.json")
    if not os.path.isfile(path):
        raise ExperimentError(
            f"--baseline-from {source}: no experiment there (no settings.json); "
            "give the --out of an earlier experiment",
            EXIT_USAGE,
        )
    old = read_settings(path, advice="give the --out of an earlier experiment")
    identity = settings.identity()
    differ = [k for k in BASELINE_SETTINGS if old.get(k) != identity[k]]
    if differ:
        details = "; ".join(f"{k}: {old.get(k)!r} there, {identity[k]!r} here" for k in differ)
        raise ExperimentError(
            f"--baseline-from {source}: its baseline was tuned with other settings ({details})", EXIT_USAGE
        )
    now = fingerprints(settings.ini, settings.dev, settings.test, None, None)
    now = {k: now[k] for k in BASELINE_FILES}
    recorded = old.get("fingerprints")
    before: dict = recorded if isinstance(recorded, dict) else {}
    if isinstance(before.get("ini_files"), dict):
        before = {**before, "ini_files": {**before["ini_files"], **retimed(before["ini_files"], now["ini_files"])}}
    if not before:
        raise ExperimentError(
            f"--baseline-from {source}: its settings.json records no fingerprints of the files (an "
            "experiment of an earlier version): that they are unchanged cannot be checked",
            EXIT_USAGE,
        )
    files = changed_files(before, now, {"ini": settings.ini, "dev": settings.dev, "test": settings.test})
    if files:
        raise ExperimentError(
            f"--baseline-from {source}: files changed since that experiment started ({', '.join(files)})", EXIT_USAGE
        )
    return old


def _same_start(source: str, start_ini: str) -> None:
    """Refuse a baseline that started MERT from another ``start.ini`` than ``start_ini``."""
    theirs = os.path.join(source, "systems", BASELINE.key, "start.ini")
    try:
        with open(theirs, "rb") as a, open(start_ini, "rb") as b:
            same = a.read() == b.read()
    except OSError as e:
        raise ExperimentError(
            f"--baseline-from {source}: cannot compare its {theirs} ({e.strerror})", EXIT_OS
        ) from None
    if not same:
        raise ExperimentError(
            f"--baseline-from {source}: its baseline started MERT from other weights or features "
            f"({theirs} differs from {start_ini})",
            EXIT_USAGE,
        )


def _read_result(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ExperimentError(f"{path}: cannot read it ({e})", EXIT_OS) from None
    return result if isinstance(result, dict) else {"not an object": result}


def borrow_baseline(settings: Settings, source: str, start_ini: str, say: EventCallback = lambda _: None) -> int:
    """Copy the baseline's finished runs 1..``settings.runs`` that ``--out`` lacks from the
    experiment in ``source`` (checked by ``check_source``; its baseline's start ``start_ini``,
    this experiment's); return how many were copied. Every check is made before the first copy."""
    source = os.path.abspath(source)
    wanted = _finished_runs(settings, source, BASELINE, 0, say)
    if wanted:
        _same_start(source, start_ini)
    return _copy(wanted, source, BASELINE, say)


def borrow_network_runs(
    settings: Settings, source: str, index: int, start_ini: str, say: EventCallback = lambda _: None
) -> int:
    """Copy ``+ RNN``'s finished runs that ``--out`` lacks from the experiment in ``source`` where
    they are this experiment's own (module text; ``index``: its place among this experiment's
    systems, for the seeds; ``start_ini``: its start here, its table rescored); return how many
    were copied. Where they are not (their files missing or unreadable included), say why and
    copy none; only this experiment's own files unreadable are an error."""
    source = os.path.abspath(source)
    reason, tables = network_difference(settings, source, RNN, start_ini)
    wanted = []
    if not reason:
        try:
            wanted = _finished_runs(settings, source, RNN, index, say)
        except ExperimentError as e:  # a result.json there unreadable, or of another seed
            reason = str(e)
    if reason:
        say(f"{RNN.key}: the runs in {source} are not this experiment's ({reason}): tuned here")
        return 0
    return _copy(wanted, source, RNN, say, tables)


def _finished_runs(
    settings: Settings, source: str, system: System, index: int, say: EventCallback
) -> list[tuple[int, str, str, dict]]:
    """``system``'s runs that ``--out`` lacks and ``source`` has finished, with their seeds
    checked: (run, here, there, result)."""
    wanted = []
    for run in range(1, settings.runs + 1):
        name = os.path.join("systems", system.key, f"run{run}")
        here, there = os.path.join(settings.out_dir, name), os.path.join(source, name)
        if os.path.exists(os.path.join(here, "result.json")):
            continue
        result = _read_result(os.path.join(there, "result.json"))
        if result is None:
            say(f"{system.key} run {run}: not finished in {source}, tuned here")
            continue
        seed = run_seed(settings.seed, index, run)
        if result.get("seed") != seed:
            raise ExperimentError(
                f"{there}/result.json: not {_label(system)}'s run {run} with seed {seed} (it records {result!r:.80})",
                EXIT_USAGE,
            )
        wanted.append((run, here, there, result))
    return wanted


def _label(system: System) -> str:
    return "the baseline" if system == BASELINE else system.label


def _copy(
    wanted: list[tuple[int, str, str, dict]],
    source: str,
    system: System,
    say: EventCallback,
    tables: tuple[str, str] | None = None,
) -> int:
    """Copy the ``wanted`` runs (``_finished_runs``); with ``tables`` (the other experiment's
    rescored table, this one's), every ini of a copied run names this one's table instead."""
    for run, here, there, result in wanted:
        partial = f"{here}.copying"
        try:
            shutil.rmtree(partial, ignore_errors=True)
            shutil.rmtree(here, ignore_errors=True)  # an unfinished run of this experiment
            shutil.copytree(
                there,
                partial,
                ignore=lambda directory, _, top=there: ["rerank"] if directory == top else [],
                copy_function=shutil.copyfile,  # the data, not a read-only mode of an archived run
                symlinks=True,
            )
            for directory, _, names in os.walk(partial):
                os.chmod(directory, os.stat(directory).st_mode | stat.S_IRWXU)
                for name in names:
                    if tables and name.endswith(".ini"):
                        repoint_table(os.path.join(directory, name), *tables)
            write_json(os.path.join(partial, "result.json"), {**result, "borrowed_from": source})
            os.rename(partial, here)
        except (OSError, UnicodeDecodeError) as e:
            raise ExperimentError(f"{there}: cannot copy it to {here} ({e})", EXIT_OS) from None
        say(f"{system.key} run {run}: taken from {source}")
    return len(wanted)
