"""``experiment --baseline-from DIR``: the baseline's finished runs copied from another
experiment, and every refusal made before a table is rescored (other settings, a changed dev
set, a directory that holds no experiment, --out itself, another start.ini, another seed). The
copy is checked file by file: whole, without the reranked lists, atomically, writable, with its
origin recorded, and only for the runs --out lacks. + RNN's runs are copied only where they are
this experiment's own (network, rescoring options, start, table), else tuned here."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from phrase_rescorer.experiment.borrowed import borrow_baseline, borrow_network_runs, check_source
from phrase_rescorer.experiment.settings import check_resume
from phrase_rescorer.experiment.systems import BASELINE, ExperimentError, prepare_system
from tests.faults.conftest import TINY
from tests.faults.test_experiment_faults import experiment, listing, one_error, settings

START = "[weight]\nLM0= 0.5\n"


def earlier(files: dict[str, Path], tmp_path: Path, runs: int = 2, **options: object) -> Path:
    """An earlier experiment's --out: its settings.json (``settings`` with ``options``), its
    baseline's start.ini and finished runs, each with a MERT directory and reranked lists."""
    source = tmp_path / "earlier"
    source.mkdir()
    first = settings(files, source)
    for key, value in options.items():
        setattr(first, key, value)
    check_resume(first)
    prepare_system(BASELINE, first.ini, "", None, str(source), start_weights=first.start_weights)
    for run in range(1, runs + 1):
        run_dir = source / "systems" / "baseline" / f"run{run}"
        (run_dir / "mert-work" / "rerank").mkdir(parents=True)  # a deeper "rerank" is data
        (run_dir / "mert-work" / "run1.best100.out").write_text(f"0 ||| run {run} ||| d: 1 ||| 1\n")
        (run_dir / "rerank").mkdir()
        (run_dir / "rerank" / "test.nbest.gz").write_bytes(b"lists of another CSLM")
        (run_dir / "test.1best").write_text(f"the output of run {run}\n")
        result = {"system": "baseline", "run": run, "seed": first.seed + run}
        (run_dir / "result.json").write_text(json.dumps(result))
    return source


def mine(files: dict[str, Path], out: Path, runs: int = 3) -> tuple:
    """This experiment's settings and its baseline's start.ini, as the runner prepares them."""
    here = settings(files, out)
    here.runs = runs
    out.mkdir(exist_ok=True)
    return here, prepare_system(BASELINE, here.ini, "", None, str(out))


def test_the_baseline_runs_are_copied_whole_without_their_lists(files: dict[str, Path], tmp_path: Path) -> None:
    source = earlier(files, tmp_path, runs=2)
    for directory, _, _ in os.walk(source / "systems"):  # an archived experiment, kept read-only
        os.chmod(directory, 0o555)
    here, start = mine(files, tmp_path / "out")
    check_source(here, str(source))
    said: list[str] = []
    assert borrow_baseline(here, str(source), start, said.append) == 2
    assert said == [
        f"baseline run 3: not finished in {source}, tuned here",
        f"baseline run 1: taken from {source}",
        f"baseline run 2: taken from {source}",
    ]
    for run in (1, 2):
        there = source / "systems" / "baseline" / f"run{run}"
        copy = tmp_path / "out" / "systems" / "baseline" / f"run{run}"
        copied = listing(copy)
        result = json.loads(copied.pop("result.json") or b"")
        assert result == {**json.loads((there / "result.json").read_text()), "borrowed_from": str(source)}
        assert copied == {k: v for k, v in listing(there).items() if k != "result.json" and not k.startswith("rerank")}
        assert all(os.stat(p).st_mode & stat.S_IWUSR for p, _, _ in os.walk(copy))  # reranked lists can go in
    assert not (tmp_path / "out" / "systems" / "baseline" / "run3").exists()
    for directory, _, _ in os.walk(source / "systems"):
        os.chmod(directory, 0o755)
    # a run --out has finished is its own: not copied again
    (tmp_path / "out" / "systems" / "baseline" / "run1" / "test.1best").write_text("tuned here\n")
    assert borrow_baseline(here, str(source), start) == 0
    assert (tmp_path / "out" / "systems" / "baseline" / "run1" / "test.1best").read_text() == "tuned here\n"


def test_an_unfinished_run_and_an_interrupted_copy_are_replaced(files: dict[str, Path], tmp_path: Path) -> None:
    source = earlier(files, tmp_path, runs=1)
    out = tmp_path / "out"
    stale = out / "systems" / "baseline" / "run1" / "mert-work"
    stale.mkdir(parents=True)
    (stale / "run3.moses.ini").write_text("an interrupted MERT run\n")
    (out / "systems" / "baseline" / "run1.copying").mkdir()
    (out / "systems" / "baseline" / "run1.copying" / "half").write_text("an interrupted copy\n")
    here, start = mine(files, out, runs=1)
    assert borrow_baseline(here, str(source), start) == 1
    assert not (stale / "run3.moses.ini").exists()
    assert (out / "systems" / "baseline" / "run1" / "result.json").exists()
    assert sorted(p.name for p in (out / "systems" / "baseline").iterdir()) == ["run1", "start.ini"]


@pytest.mark.parametrize("what", ["seed", "start.ini"])
def test_a_run_of_another_seed_or_start_is_refused_before_any_copy(
    files: dict[str, Path], tmp_path: Path, what: str
) -> None:
    source = earlier(files, tmp_path, runs=2)
    out = tmp_path / "out"
    here, start = mine(files, out)
    if what == "seed":
        (source / "systems" / "baseline" / "run2" / "result.json").write_text(json.dumps({"run": 2, "seed": 1002}))
        message = r"run2/result.json: not the baseline's run 2 with seed 3 \(it records \{'run': 2, 'seed': 1002\}\)"
    else:
        Path(start).write_text(Path(start).read_text().replace("LM0= 0.5", "LM0= 0.25"))
        message = r"its baseline started MERT from other weights or features \(.*start.ini differs from .*\)"
    with pytest.raises(ExperimentError, match=message) as e:
        borrow_baseline(here, str(source), start)
    assert e.value.exit_code == 2
    assert sorted(p.name for p in (out / "systems" / "baseline").iterdir()) == ["start.ini"]  # nothing copied


REFUSALS = {
    "seed": ({"seed": 5}, [], "its baseline was tuned with other settings (seed: 5 there, 1 here)"),
    "nbest": ({"nbest": 200}, [], "its baseline was tuned with other settings (nbest: 200 there, 100 here)"),
    "start weights": (
        {"start_weights": "ini"},
        [],
        "its baseline was tuned with other settings (start_weights: 'ini' there, 'moses-defaults' here)",
    ),
    "iterations": (
        {},
        ["--maximum-iterations", "4"],
        "its baseline was tuned with other settings (max_iterations: None there, 4 here)",
    ),
    "dev file": ({}, [], "files changed since that experiment started ({dev})"),
    "no fingerprints": (
        {},
        [],
        "its settings.json records no fingerprints of the files (an experiment of an earlier version): "
        "that they are unchanged cannot be checked",
    ),
    "no experiment": ({}, [], None),
    "out itself": ({}, [], "that is --out itself"),
}


@pytest.mark.parametrize("what", REFUSALS)
def test_a_baseline_that_is_not_this_one_is_refused_before_any_work(
    stand_in_moses: Path, files: dict[str, Path], tmp_path: Path, what: str
) -> None:
    options, extra, expected = REFUSALS[what]
    source = earlier(files, tmp_path, runs=1, **options)
    out = tmp_path / "out"
    given = source
    if what == "dev file":
        files["dev.fr"].write_text(files["dev.fr"].read_text().replace("a", "b", 1))
    elif what == "no fingerprints":
        recorded = json.loads((source / "settings.json").read_text())
        del recorded["fingerprints"]
        (source / "settings.json").write_text(json.dumps(recorded))
    elif what == "no experiment":
        given = tmp_path
    elif what == "out itself":
        out = source
    line = expected.format(dev=files["dev.fr"]) if expected else None
    if line is None:
        line = "no experiment there (no settings.json); give the --out of an earlier experiment"

    def recorded() -> dict:
        return {k: v for k, v in listing(source).items() if k != ".experiment.lock"}

    before = recorded()
    code, err = experiment(stand_in_moses, files, str(out), "--baseline-from", str(given), *extra)
    assert code == 2
    assert one_error(err) == f"phrase-rescorer: error: --baseline-from {given}: {line}"
    assert recorded() == before
    assert out == source or [p.name for p in out.iterdir()] == [".experiment.lock"]  # nothing recorded


def test_a_damaged_settings_json_there_is_not_to_be_removed(files: dict[str, Path], tmp_path: Path) -> None:
    source = earlier(files, tmp_path, runs=1)
    (source / "settings.json").write_text("{not json")
    here, _ = mine(files, tmp_path / "out")
    advice = "give the --out of an earlier experiment"
    with pytest.raises(ExperimentError, match=rf"not an experiment's settings .*; {advice}$"):
        check_source(here, str(source))


def _rnn_system(out: Path, table: str, weight: str = "0.2", named: Path | None = None) -> str:
    """+ RNN's start.ini and rescored table under ``out`` (the ini naming the table as ``named``,
    by default where it is); the start."""
    tables, system = out / "tables", out / "systems" / "rnn"
    tables.mkdir(parents=True, exist_ok=True)
    system.mkdir(parents=True, exist_ok=True)
    with gzip.open(tables / "phrase-table.rnn.gz", "wt", encoding="utf-8") as f:
        f.write(table)
    start = system / "start.ini"
    path = named or tables / "phrase-table.rnn.gz"
    start.write_text(
        f"[feature]\nPhraseDictionaryMemory name=TranslationModel0 num-features=5 path={path} input-factor=0\n"
        f"[weight]\nTranslationModel0= {weight}\n"
    )
    return str(start)


TABLE = "a ||| b ||| 0.5 0.5 0.5 0.5 0.01 ||| 0-0 |||\nc ||| d ||| 0.5 0.5 0.5 0.5 0.02 ||| 0-0 |||\n"
NOT_OURS = {
    "ours": None,
    "moved": None,  # the earlier --out moved since: its start.ini names the table where it was
    "no network there": "it ran no network",
    "network": "another network than -m",
    "start": "another start: ",
    "table": "its table ",
    "their table gone": "its table cannot be read: ",
    "their start gone": "its ",
    "seed": "not + RNN's run 1 with seed 1002",
}


@pytest.mark.parametrize("what", NOT_OURS)
def test_the_rnn_runs_are_copied_only_where_they_are_this_experiments(
    files: dict[str, Path], tmp_path: Path, what: str
) -> None:
    network = tmp_path / "rnn.pt"
    network.write_bytes(b"the network's bytes")
    source = tmp_path / "earlier"
    source.mkdir()
    first = settings(files, source, None if what == "no network there" else network)
    check_resume(first)
    _rnn_system(source, TABLE, named=tmp_path / "was" / "tables" / "phrase-table.rnn.gz" if what == "moved" else None)
    run_dir = source / "systems" / "rnn" / "run1"
    (run_dir / "mert-work").mkdir(parents=True)
    table_there = source / "tables" / "phrase-table.rnn.gz"
    named_there = tmp_path / "was" / "tables" / "phrase-table.rnn.gz" if what == "moved" else table_there
    (run_dir / "moses.ini").write_text(f"PhraseDictionaryMemory path={named_there} input-factor=0\n")
    (run_dir / "mert-work" / "run2.moses.ini").write_text(f"x path={named_there}.bak path={named_there}\n")
    (run_dir / "test.1best").write_text("the output\n")
    seed = first.seed + 1000 + 1 + (7 if what == "seed" else 0)
    (run_dir / "result.json").write_text(json.dumps({"system": "rnn", "run": 1, "seed": seed}))
    out = tmp_path / "out"
    here = settings(files, out, network)
    here.runs = 2
    if what == "network":
        other = tmp_path / "other.pt"
        other.write_bytes(b"another network's bytes")
        here.model = str(other)
    start = _rnn_system(out, TABLE.replace("0.02", "0.03") if what == "table" else TABLE)
    if what == "start":
        Path(start).write_text(Path(start).read_text().replace("= 0.2", "= 0.3"))
    elif what == "their table gone":
        table_there.unlink()
    elif what == "their start gone":
        (source / "systems" / "rnn" / "start.ini").unlink()
    said: list[str] = []
    copied = borrow_network_runs(here, str(source), 1, start, said.append)
    if NOT_OURS[what] is None:
        assert copied == 1
        assert said == [f"rnn run 2: not finished in {source}, tuned here", f"rnn run 1: taken from {source}"]
        copy = out / "systems" / "rnn" / "run1"
        result = json.loads((copy / "result.json").read_text())
        assert result["borrowed_from"] == str(source) and result["seed"] == 1002
        ours = out / "tables" / "phrase-table.rnn.gz"  # the copied inis name this experiment's table
        assert (copy / "moses.ini").read_text() == f"PhraseDictionaryMemory path={ours} input-factor=0\n"
        assert (copy / "mert-work" / "run2.moses.ini").read_text() == f"x path={named_there}.bak path={ours}\n"
        assert (copy / "test.1best").read_text() == "the output\n"
        assert borrow_network_runs(here, str(source), 1, start) == 0  # finished here now
    else:
        assert copied == 0 and not (out / "systems" / "rnn" / "run1").exists()
        assert len(said) == 1 and NOT_OURS[what] in said[0]
        assert said[0].startswith(f"rnn: the runs in {source} are not this experiment's (")
        assert said[0].endswith("): tuned here")


def test_this_experiments_own_table_unreadable_is_an_error(files: dict[str, Path], tmp_path: Path) -> None:
    network = tmp_path / "rnn.pt"
    network.write_bytes(b"the network's bytes")
    source = tmp_path / "earlier"
    source.mkdir()
    check_resume(settings(files, source, network))
    _rnn_system(source, TABLE)
    out = tmp_path / "out"
    start = _rnn_system(out, TABLE)
    (out / "tables" / "phrase-table.rnn.gz").write_bytes(gzip.compress(TABLE.encode())[:-12])  # truncated
    with pytest.raises(ExperimentError, match="phrase-table.rnn.gz") as e:
        borrow_network_runs(settings(files, out, network), str(source), 1, start)
    assert e.value.exit_code in (3, 6)


def test_a_baseline_path_that_begins_with_the_earlier_out_is_not_rewritten(
    files: dict[str, Path], tmp_path: Path
) -> None:
    """The baseline's start.ini is compared byte for byte: an ini path under a directory whose
    name begins with the earlier --out's (``earlier-model`` beside ``earlier``) stays as it is."""
    model_dir = tmp_path / "earlier-model"
    shutil.copytree(TINY, model_dir)
    files["ini"].write_text((TINY / "moses.ini").read_text().replace("@MODEL_DIR@", str(model_dir)))
    source = earlier(files, tmp_path, runs=1)
    here, start = mine(files, tmp_path / "out", runs=1)
    assert str(model_dir) in Path(start).read_text()
    check_source(here, str(source))
    assert borrow_baseline(here, str(source), start) == 1
