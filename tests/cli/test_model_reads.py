"""Each command reads each model file it is given once: the file's kind is learnt from the same
reading that the network, the CSLM or the saved state of ``--resume`` is built from
(``model.kinds.open_model``). Every reading is counted at ``torch.load``, the programs run in this
process."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from phrase_rescorer.experiment import reranked as runner_lists
from phrase_rescorer.experiment import runner
from phrase_rescorer.experiment.reranked import rerank_dir
from tests.helpers.cli_run import run_cli
from tests.helpers.cslm import TINY_MOSES, tiny_lm
from tests.helpers.moses import stand_in_moses
from tests.helpers.nmt import tiny_nmt
from tests.helpers.paths import SAMPLE
from tests.helpers.rescore_data import tiny_checkpoint
from tests.helpers.train_options import TASKS

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("reads")
    return {
        "phrase": tiny_checkpoint(d / "phrase.pt", hidden=8, vocab=60),
        "nmt": tiny_nmt(d / "nmt.pt", steps=2),
        "cslm": tiny_lm(d / "cslm.pt", steps=2),
    }


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """The model files read, each with the number of its readings."""
    counted: Counter[str] = Counter()
    load = torch.load

    def counting(f: Any, *args: Any, **kwargs: Any) -> Any:
        counted[str(getattr(f, "name", f))] += 1  # a path, or a file opened by its path
        return load(f, *args, **kwargs)

    monkeypatch.setattr(torch, "load", counting)
    return counted


Run = Callable[[list[str]], None]


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Run:
    """``phrase-rescorer -q ARGS`` in this process, which must succeed."""

    def succeeds(args: list[str]) -> None:
        code, err = run_cli(["-q", *args], monkeypatch, capsys)
        assert code == 0, err

    return succeeds


def test_nbest_score_rescore_translate_read_each_model_once(
    models: dict[str, Path], reads: Counter[str], tmp_path: Path, run: Run
) -> None:
    nbest = tmp_path / "in.nbest"
    nbest.write_text("".join(f"{i} ||| un homme . ||| LM0= -10.5 ||| -3.7\n" for i in range(3)))
    cslm, nmt, phrase = (str(models[k]) for k in ("cslm", "nmt", "phrase"))
    source, target = str(tmp_path / "src.en"), str(tmp_path / "tgt.fr")
    for name, path in (("dev.en", source), ("dev.fr", target)):
        Path(path).write_text("".join((TINY_MOSES / name).read_text().splitlines(keepends=True)[:3]))
    out = str(tmp_path / "out.nbest")
    run(["nbest", str(nbest), out, "-m", cslm, "-m", nmt, "--source", source])
    assert dict(reads) == {cslm: 1, nmt: 1}
    reads.clear()
    run(["score", target, "-m", cslm, "-o", str(tmp_path / "lm.txt")])
    run(["score", source, target, "-m", nmt, "-o", str(tmp_path / "nmt.txt")])
    assert dict(reads) == {cslm: 1, nmt: 1}
    reads.clear()
    run(["rescore", str(SAMPLE), str(tmp_path / "pt.gz"), "-m", phrase])
    assert dict(reads) == {phrase: 1}
    reads.clear()
    run(["translate", source, str(tmp_path / "out.fr"), "-m", nmt, "--max-length", "3"])
    assert dict(reads) == {nmt: 1}


def test_average_reads_each_file_once(models: dict[str, Path], reads: Counter[str], tmp_path: Path, run: Run) -> None:
    phrase = str(models["phrase"])
    run(["average", str(tmp_path / "avg.pt"), phrase, phrase, phrase])
    assert dict(reads) == {phrase: 1}


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_resume_and_average_last_read_the_saved_state_once(
    task: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: Run
) -> None:
    inputs, out = task.inputs(tmp_path), tmp_path / "m.pt"
    keep = ["--keep-checkpoints", "2", "--valid-every", "2"] if task.command == "train" else []
    run([task.command, *inputs, str(out), *task.options, *keep, "--max-steps", "2"])
    counted: Counter[str] = Counter()
    load = torch.load
    name = lambda f: str(getattr(f, "name", f))  # noqa: E731  (a path, or a file opened by its path)
    monkeypatch.setattr(torch, "load", lambda f, *a, **k: counted.update([name(f)]) or load(f, *a, **k))
    run([task.command, *inputs, str(out), *task.options, *keep, "--max-steps", "4", "--resume"])
    last = str(tmp_path / "m.last.pt")
    assert counted[last] == 1, counted
    if keep:  # the run's .last.pt names the kept networks
        counted.clear()
        run(["average", str(tmp_path / "avg.pt"), "--average-last", "2", str(out)])
        assert counted[last] == 1 and all(n == 1 for n in counted.values()), counted


def test_experiment_reads_each_model_once(
    models: dict[str, Path],
    reads: Counter[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    run: Run,
) -> None:
    """Through its checks, the + RNN table, the report's descriptions and the scored n-best lists
    of every decoder run; Moses' tuning, decoding and reranking stand in (writing what they would),
    so that no Moses runs."""
    cslm, nmt, phrase = (str(models[k]) for k in ("cslm", "nmt", "phrase"))
    ini = tmp_path / "moses.ini"
    ini.write_text((TINY_MOSES / "moses.ini").read_text().replace("@MODEL_DIR@", str(TINY_MOSES)))
    parts = {part: (str(TINY_MOSES / f"{part}.en"), str(TINY_MOSES / f"{part}.fr")) for part in ("dev", "test")}

    def outputs(directory: Path, kind: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for part, (_, reference) in parts.items():
            (directory / f"{part}.{kind}").write_text(Path(reference).read_text())
        (directory / "result.json").write_text(json.dumps({"heldout_folds": 0}))

    def tuned(
        toolkit: Any, settings: Any, system: Any, start_ini: str, run: int, seed: int, say: Any, lists: int
    ) -> None:
        # without the run's lists: score_lists decodes them (``decoded``)
        run_dir = Path(settings.out_dir) / "systems" / system.key / f"run{run}"
        outputs(run_dir, "1best")
        shutil.copyfile(start_ini, run_dir / "moses.ini")

    def decoded(toolkit: Any, ini: str, source: str, output: str, size: int, **_: Any) -> None:
        lines = Path(source).read_text().splitlines()
        Path(output).write_text("".join(f"{i} ||| {line} ||| LM0= -10.5 ||| -3.5\n" for i, line in enumerate(lines)))

    def reranked(toolkit: Any, run_dir: str, system: Any, *args: Any, **kwargs: Any) -> None:
        outputs(Path(rerank_dir(run_dir)) / system.key, "best")

    monkeypatch.setattr(runner, "_one_run", tuned)
    monkeypatch.setattr(runner, "rerank_run", reranked)
    monkeypatch.setattr(runner_lists, "decode_nbest", decoded)
    moses = stand_in_moses(tmp_path / "moses")
    args = ["experiment", "--moses", str(moses), "--ini", str(ini), "--dev", *parts["dev"], "--test", *parts["test"]]
    args += ["-m", phrase, "--lm", cslm, "--nmt", nmt, "--runs", "1", "--trials", "100", "--min-coverage", "0"]
    code, err = run_cli(["-q", *args, "--out", str(tmp_path / "refused")], monkeypatch, capsys)
    assert code == 2 and "the target language is unknown" in err  # -m records none: refused once all are read
    assert dict(reads) == {phrase: 1, cslm: 1, nmt: 1}
    reads.clear()
    run([*args, "--target-lang", "fr", "--out", str(tmp_path / "out")])
    assert dict(reads) == {phrase: 1, cslm: 1, nmt: 1}
    assert (tmp_path / "out" / "systems" / "rnn" / "run1" / "rerank" / "cslm-nmt-rnn" / "result.json").exists()
