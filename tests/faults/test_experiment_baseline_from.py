"""``experiment --baseline-from DIR``: the baseline's finished runs copied from another
experiment, and every refusal made before any work (another seed, a changed dev set, a directory
that holds no experiment, --out itself). The copy is checked file by file: whole, without the
reranked lists, atomically, and only for the runs --out lacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phrase_rescorer.experiment.borrowed import borrow_baseline, check_source
from phrase_rescorer.experiment.settings import check_resume
from phrase_rescorer.experiment.systems import ExperimentError
from tests.faults.test_experiment_faults import experiment, listing, one_error, settings


def earlier(files: dict[str, Path], tmp_path: Path, runs: int = 2, seed: int = 1) -> Path:
    """An earlier experiment's --out: its settings.json and its baseline's finished runs, each
    with a MERT directory and reranked lists."""
    source = tmp_path / "earlier"
    source.mkdir()
    first = settings(files, source)
    first.seed = seed
    check_resume(first)
    for run in range(1, runs + 1):
        run_dir = source / "systems" / "baseline" / f"run{run}"
        (run_dir / "mert-work").mkdir(parents=True)
        (run_dir / "mert-work" / "run1.best100.out").write_text(f"0 ||| run {run} ||| d: 1 ||| 1\n")
        (run_dir / "rerank").mkdir()
        (run_dir / "rerank" / "test.nbest.gz").write_bytes(b"lists of another CSLM")
        (run_dir / "test.1best").write_text(f"the output of run {run}\n")
        (run_dir / "result.json").write_text(json.dumps({"system": "baseline", "run": run, "seed": seed + run}))
    return source


def test_the_baseline_runs_are_copied_whole_without_their_lists(files: dict[str, Path], tmp_path: Path) -> None:
    source = earlier(files, tmp_path, runs=2)
    out = tmp_path / "out"
    out.mkdir()
    mine = settings(files, out)
    mine.runs = 3
    check_source(mine, str(source))
    said: list[str] = []
    assert borrow_baseline(mine, str(source), said.append) == 2
    assert said == [
        f"baseline run 1: taken from {source}",
        f"baseline run 2: taken from {source}",
        f"baseline run 3: not finished in {source}, tuned here",
    ]
    for run in (1, 2):
        there, here = source / "systems" / "baseline" / f"run{run}", out / "systems" / "baseline" / f"run{run}"
        assert listing(here) == {k: v for k, v in listing(there).items() if not k.startswith("rerank")}
    assert not (out / "systems" / "baseline" / "run3").exists()
    assert not list(out.rglob("*.copying"))
    # a run --out has finished is its own: not copied again
    (out / "systems" / "baseline" / "run1" / "test.1best").write_text("tuned here\n")
    assert borrow_baseline(mine, str(source)) == 0
    assert (out / "systems" / "baseline" / "run1" / "test.1best").read_text() == "tuned here\n"


def test_an_unfinished_run_of_out_is_replaced(files: dict[str, Path], tmp_path: Path) -> None:
    source = earlier(files, tmp_path, runs=1)
    out = tmp_path / "out"
    stale = out / "systems" / "baseline" / "run1" / "mert-work"
    stale.mkdir(parents=True)
    (stale / "run3.moses.ini").write_text("an interrupted MERT run\n")
    mine = settings(files, out)
    mine.runs = 1
    assert borrow_baseline(mine, str(source)) == 1
    assert not (stale / "run3.moses.ini").exists()
    assert (out / "systems" / "baseline" / "run1" / "result.json").exists()


def test_a_run_of_another_seed_is_refused(files: dict[str, Path], tmp_path: Path) -> None:
    source = earlier(files, tmp_path, runs=1)
    result = source / "systems" / "baseline" / "run1" / "result.json"
    result.write_text(json.dumps({"system": "baseline", "run": 1, "seed": 1001}))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ExperimentError, match=r"not the baseline's run 1 with seed 2") as e:
        borrow_baseline(settings(files, out), str(source))
    assert e.value.exit_code == 2
    assert not (out / "systems").exists()


@pytest.mark.parametrize("what", ["seed", "dev file", "no experiment", "out itself"])
def test_a_baseline_that_is_not_this_one_is_refused_before_any_work(
    stand_in_moses: Path, files: dict[str, Path], tmp_path: Path, what: str
) -> None:
    source = earlier(files, tmp_path, runs=1, seed=5 if what == "seed" else 1)
    out = tmp_path / "out"
    expected = {
        "seed": f"--baseline-from {source}: its baseline was tuned with other settings (seed: 5 there, 1 here)",
        "dev file": f"--baseline-from {source}: its baseline was tuned on other files ({files['dev.fr']})",
        "no experiment": f"--baseline-from {tmp_path}: no experiment there (no settings.json); "
        "give the --out of an earlier experiment",
        "out itself": f"--baseline-from {source}: that is --out itself",
    }[what]
    if what == "dev file":
        files["dev.fr"].write_text(files["dev.fr"].read_text().replace("a", "b", 1))
    given = {"no experiment": tmp_path, "out itself": source}.get(what, source)
    if what == "out itself":
        out = source

    def recorded() -> dict:
        return {k: v for k, v in listing(source).items() if k != ".experiment.lock"}

    before = recorded()
    code, err = experiment(stand_in_moses, files, str(out), "--baseline-from", str(given))
    assert code == 2
    assert one_error(err) == f"phrase-rescorer: error: {expected}"
    assert recorded() == before
    assert out == source or [p.name for p in out.iterdir()] == [".experiment.lock"]  # nothing recorded
