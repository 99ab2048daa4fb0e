"""Checkpoint averaging (``average``, ``--keep-checkpoints``): the averaged file is a normal model
file that loads and scores; N copies of one file average to that file; networks of other
settings are refused with one line (exit 2) and nothing written; a run keeps the networks of
its last N validations, and ``--average-last N`` averages them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from phrase_rescorer.data.vocab import Vocabulary
from phrase_rescorer.model.averaging import AveragingError, average_checkpoints, write_checkpoint
from phrase_rescorer.model.checkpoint import load_checkpoint, save_checkpoint
from phrase_rescorer.rescoring.scorers import make_scorer
from phrase_rescorer.training.run_files import is_kept_path, keep, kept_path
from tests.helpers.cli_run import left_behind, run_cli
from tests.helpers.nmt import SIZES, TINY_MOSES
from tests.helpers.rescore_data import sample_window, tiny_arch_checkpoint, tiny_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")


def _scores(path: Path) -> np.ndarray:
    sources, targets, index = sample_window(100)
    return make_scorer("prefix", load_checkpoint(str(path)).build_model(), "cpu").score(sources, targets, index)


def test_copies_of_one_file_average_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tiny_arch_checkpoint(tmp_path / "m.pt", "rnnsearch", seed=1, dropout=0.3)
    out = tmp_path / "avg.pt"
    code, err = run_cli(["average", str(out), str(model), str(model), str(model)], monkeypatch, capsys)
    assert code == 0, err
    assert f"wrote {out}: the mean of 3 networks" in err
    averaged, original = load_checkpoint(str(out)), load_checkpoint(str(model))
    assert averaged.fingerprint() == original.fingerprint()  # the same weights, settings, vocabularies
    assert averaged.arch == original.arch and averaged.info["averaged"]["files"] == [str(model)] * 3
    assert np.array_equal(_scores(out), _scores(model))


@pytest.mark.parametrize("arch", ["gnmt", "transformer"])
def test_the_mean_of_two_networks_loads_and_scores(tmp_path: Path, arch: str) -> None:
    a = tiny_arch_checkpoint(tmp_path / "a.pt", arch, seed=1, layers=2)
    b = tiny_arch_checkpoint(tmp_path / "b.pt", arch, seed=2, layers=2)
    averaged = average_checkpoints([str(a), str(b)])
    wa, wb = load_checkpoint(str(a)).state_dict, load_checkpoint(str(b)).state_dict
    for name, weight in averaged.state_dict.items():
        torch.testing.assert_close(weight, (wa[name] + wb[name]) / 2, rtol=0, atol=1e-7)
    write_checkpoint(averaged, str(tmp_path / "avg.pt"))
    scores = _scores(tmp_path / "avg.pt")
    assert np.all(np.isfinite(scores)) and np.all(scores < 0) and np.ptp(scores) > 0.1
    assert not np.array_equal(scores, _scores(a)) and not np.array_equal(scores, _scores(b))


def test_networks_of_other_settings_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rnnsearch = tiny_arch_checkpoint(tmp_path / "r.pt", "rnnsearch")
    others = {
        "gnmt.pt": lambda p: tiny_arch_checkpoint(p, "gnmt", layers=2),
        "transformer.pt": lambda p: tiny_arch_checkpoint(p, "transformer", layers=2),
        "cho.pt": lambda p: tiny_checkpoint(p),
        "dropout.pt": lambda p: tiny_arch_checkpoint(p, "rnnsearch", dropout=0.2),
    }
    out = tmp_path / "avg.pt"
    for name, make in others.items():
        other = make(tmp_path / name)
        code, err = run_cli(["average", str(out), str(rnnsearch), str(other)], monkeypatch, capsys)
        assert code == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"phrase-rescorer: error: {other}: another network than")
        assert "only model files of one training run" in lines[0]
        assert not out.exists() and not left_behind(tmp_path)
    with pytest.raises(AveragingError, match="other vocabularies"):
        small = tmp_path / "small.pt"
        tiny_checkpoint(small)
        ckpt = load_checkpoint(str(small))
        tokens = list(ckpt.tgt_vocab.tokens)
        tokens[5], tokens[6] = tokens[6], tokens[5]
        save_checkpoint(str(tmp_path / "swapped.pt"), ckpt.build_model(), ckpt.src_vocab, Vocabulary(tokens))
        average_checkpoints([str(small), str(tmp_path / "swapped.pt")])


def test_the_output_may_not_be_an_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tiny_arch_checkpoint(tmp_path / "m.pt", "rnnsearch")
    before = model.read_bytes()
    code, err = run_cli(["average", str(model), str(model), str(model)], monkeypatch, capsys)
    assert code == 6 and "output is the same file as the input" in err
    assert model.read_bytes() == before


def test_keep_removes_the_oldest_of_its_own_only(tmp_path: Path) -> None:
    out = str(tmp_path / "nmt.pt")
    stale = Path(kept_path(out, 9000))  # an earlier run's, not in this run's record
    stale.write_bytes(b"x")
    kept: list[int] = []
    for step in (200, 400, 600, 800):
        kept = keep(out, kept, step, 3, lambda path: Path(path).write_bytes(b"net"))
    assert kept == [400, 600, 800]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "nmt.step400.pt",
        "nmt.step600.pt",
        "nmt.step800.pt",
        "nmt.step9000.pt",
    ]
    assert keep(out, kept, 800, 3, lambda path: None) == [400, 600, 800]  # the same step once


def test_a_run_keeps_its_last_validations_and_average_last_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = [str(TINY_MOSES / "dev.en"), str(TINY_MOSES / "dev.fr")]
    run = tmp_path / "nmt.pt"
    train = ["-q", "train-nmt", *corpus, str(run), *SIZES, "--valid-every", "2", "--threads", "1"]
    code, err = run_cli([*train, "--max-steps", "7", "--keep-checkpoints", "3"], monkeypatch, capsys)
    assert code == 0, err
    # validations at steps 2, 4, 6 and at the end, 7
    assert sorted(p.name for p in tmp_path.glob("nmt.step*.pt")) == ["nmt.step4.pt", "nmt.step6.pt", "nmt.step7.pt"]
    assert load_checkpoint(str(tmp_path / "nmt.step6.pt")).info["steps"] == 6

    out = tmp_path / "avg.pt"
    code, err = run_cli(["average", str(out), "--average-last", "2", str(run)], monkeypatch, capsys)
    assert code == 0, err
    averaged = load_checkpoint(str(out))
    assert averaged.info["averaged"]["steps"] == [6, 7]
    want = average_checkpoints([str(tmp_path / "nmt.step6.pt"), str(tmp_path / "nmt.step7.pt")])
    assert all(torch.equal(averaged.state_dict[k], v) for k, v in want.state_dict.items())

    code, err = run_cli(["average", str(out), "--average-last", "4", str(run)], monkeypatch, capsys)
    assert code == 2 and "the run kept 3 network(s), fewer than the 4 to average" in err
    code, err = run_cli(["average", str(out), "--average-last", "2", str(run), str(run)], monkeypatch, capsys)
    assert code == 2 and "--average-last takes one IN" in err
    code, err = run_cli(
        ["average", str(tmp_path / "nmt.step6.pt"), "--average-last", "2", str(run)], monkeypatch, capsys
    )
    assert code == 6 and "output is the same file as the input" in err

    # resumed, the run goes on keeping its own record
    code, err = run_cli([*train, "--max-steps", "10", "--keep-checkpoints", "3", "--resume"], monkeypatch, capsys)
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.glob("nmt.step*.pt")) == ["nmt.step10.pt", "nmt.step7.pt", "nmt.step8.pt"]


def test_an_input_or_log_named_as_a_kept_network_is_refused_before_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "nmt.step200.pt"  # the corpus, named as the run's network of step 200 would be
    source.write_bytes((TINY_MOSES / "dev.en").read_bytes())
    target = str(TINY_MOSES / "dev.fr")
    run = str(tmp_path / "nmt.pt")
    train = ["-q", "train-nmt", str(source), target, run, *SIZES, "--max-steps", "1", "--threads", "1"]
    before = source.read_bytes()
    said = "--keep-checkpoints would write a network over this file"
    code, err = run_cli([*train, "--keep-checkpoints", "2"], monkeypatch, capsys)
    assert code == 6 and f"{source}: {said}" in err
    assert source.read_bytes() == before and not Path(run).exists()
    link = tmp_path / "corpus.en"  # a link to that name is the same file
    link.symlink_to(source)
    code, err = run_cli([*train[:2], str(link), *train[3:], "--keep-checkpoints", "2"], monkeypatch, capsys)
    assert code == 6 and f"{link}: {said} (a link to {source})" in err
    log = str(tmp_path / "nmt.step7.pt")
    code, err = run_cli([*train, "--keep-checkpoints", "2", "--log", log], monkeypatch, capsys)
    assert code == 6 and said in err and not Path(log).exists()
    code, err = run_cli(train, monkeypatch, capsys)  # nothing kept: the name is the user's to choose
    assert code == 0, err


def test_kept_names(tmp_path: Path) -> None:
    out = str(tmp_path / "nmt.pt")
    assert is_kept_path(out, kept_path(out, 200)) and is_kept_path(str(tmp_path / "nmt"), kept_path(out, 5))
    for other in ("nmt.step05.pt", "nmt.step.pt", "nmt.step\u0665.pt", "nmt.step5.pt.gz", "xnmt.step5.pt", "-"):
        assert not is_kept_path(out, str(tmp_path / other) if other != "-" else other), other
    (tmp_path / "sub").mkdir()
    assert is_kept_path(out, str(tmp_path / "sub" / ".." / "nmt.step5.pt"))  # spelt another way
    (tmp_path / "nmt").symlink_to(tmp_path / "sub" / "elsewhere")  # a link named as the stem moves nothing
    assert is_kept_path(out, str(tmp_path / "nmt.step5.pt"))
    assert not is_kept_path(out, str(tmp_path / "sub" / "nmt.step5.pt"))
    (tmp_path / "in.en").symlink_to(tmp_path / "nmt.step9.pt")  # a link to a kept name
    assert is_kept_path(out, str(tmp_path / "in.en"))
    (tmp_path / "nmt.step3.pt").symlink_to(tmp_path / "sub" / "corpus")  # a link named as one: replaced
    assert is_kept_path(out, str(tmp_path / "nmt.step3.pt"))


def test_files_of_several_runs_are_refused_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every file of a run records its identity, kept through --resume: files of one run average,
    those of two runs (one command, another --seed) are refused with one line, exit 2, unless
    --allow-several-runs; a file written before runs had an identity averages, with a warning."""
    corpus = [str(TINY_MOSES / "dev.en"), str(TINY_MOSES / "dev.fr")]

    def train(out: Path, *extra: str) -> None:
        options = [*SIZES, "--valid-every", "2", "--keep-checkpoints", "3", "--threads", "1", *extra]
        code, err = run_cli(["-q", "train-nmt", *corpus, str(out), *options], monkeypatch, capsys)
        assert code == 0, err

    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    train(a, "--max-steps", "4")
    train(a, "--max-steps", "6", "--resume")
    train(b, "--max-steps", "4", "--seed", "2")
    a2, a4, a6, b4 = (str(tmp_path / name) for name in ("a.step2.pt", "a.step4.pt", "a.step6.pt", "b.step4.pt"))
    run, other_run = load_checkpoint(a2).run_id, load_checkpoint(b4).run_id
    assert run is not None and other_run is not None and run != other_run
    assert all(load_checkpoint(str(p)).run_id == run for p in (a4, a6, a, tmp_path / "a.last.pt"))
    starts = [json.loads(line) for line in (tmp_path / "a.log").read_text().splitlines() if '"start"' in line]
    assert [event["run_id"] for event in starts] == [run, run]  # the log names the run at each start

    out = tmp_path / "avg.pt"
    code, err = run_cli(["average", str(out), a2, a6], monkeypatch, capsys)  # across the resume
    assert code == 0, err
    assert "warning" not in err and load_checkpoint(str(out)).run_id == run
    out.unlink()

    code, err = run_cli(["average", str(out), a4, b4], monkeypatch, capsys)
    assert code == 2
    assert err.strip() == (
        f"phrase-rescorer: error: {b4}: of another training run than {a4} (run {other_run}, not {run}); the mean "
        "of independently trained networks is usually far worse than each of them: average the files of one run, "
        "or give --allow-several-runs"
    )
    assert not out.exists() and not left_behind(tmp_path)

    code, err = run_cli(["average", "--allow-several-runs", str(out), a4, b4], monkeypatch, capsys)
    assert code == 0, err
    assert load_checkpoint(str(out)).run_id not in (None, run, other_run)  # the mean is no run's
    out.unlink()

    older = tmp_path / "older.pt"  # as written before runs had an identity
    payload = torch.load(b4, weights_only=True)
    del payload["info"]["run_id"]
    torch.save(payload, older)
    code, err = run_cli(["average", str(out), a4, str(older)], monkeypatch, capsys)
    assert code == 0, err
    assert f"warning: {older}: records no training run" in err
    assert load_checkpoint(str(out)).run_id == run
