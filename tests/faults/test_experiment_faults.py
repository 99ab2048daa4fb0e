"""``experiment`` refusals made before any work, end to end: the --out path, a second run on a
live --out, a damaged settings.json, an ini with a relative path, files changed between a start
and a restart, and SIGHUP. The refusals come before Moses is run, so a directory of stand-in
programs is enough for ``--moses``; each case checks the exit code, the one line and that
nothing of the directory was touched."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from phrase_rescorer.cli import main
from phrase_rescorer.cli.common import Terminated
from phrase_rescorer.experiment import runner
from phrase_rescorer.experiment.settings import Settings, check_resume
from phrase_rescorer.experiment.systems import ExperimentError
from phrase_rescorer.experiment.workdir import LOCK_NAME, content_sha256, locked_out_dir, retimed
from phrase_rescorer.moses.toolkit import EXPERIMENT_NEEDS
from tests.faults.conftest import TINY
from tests.helpers.moses import moses_root
from tests.helpers.moses import stand_in_moses as stand_in
from tests.helpers.nmt import SIZES as NMT_SIZES
from tests.helpers.nmt import tiny_nmt
from tests.helpers.paths import PYTHON, cli_env
from tests.helpers.rescore_data import tiny_checkpoint


def experiment(moses: Path, files: dict[str, Path], out: str, *extra: str) -> tuple[int, str]:
    args = [
        "--moses",
        str(moses),
        "--ini",
        str(files["ini"]),
        "--dev",
        str(files["dev.en"]),
        str(files["dev.fr"]),
        "--test",
        str(files["test.en"]),
        str(files["test.fr"]),
        "--target-lang",
        "fr",
        "--out",
        out,
        *extra,
    ]
    r = subprocess.run(
        [PYTHON, "-m", "phrase_rescorer", "-q", "experiment", *args],
        capture_output=True,
        env={**cli_env(), "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    return r.returncode, r.stderr.decode()


def one_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def listing(directory: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(directory)): (p.read_bytes() if p.is_file() else None) for p in sorted(directory.rglob("*"))
    }


def test_empty_out_is_refused(stand_in_moses: Path, files: dict[str, Path]) -> None:
    code, err = experiment(stand_in_moses, files, "")
    assert code == 6 and one_error(err) == "phrase-rescorer: error: --out '': an empty path names no directory"


def test_out_on_a_dangling_link_is_refused(stand_in_moses: Path, files: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "out").symlink_to(tmp_path / "gone")
    code, err = experiment(stand_in_moses, files, str(tmp_path / "out"))
    assert code == 6
    assert one_error(err) == (
        f"phrase-rescorer: error: {tmp_path / 'out'}: --out is a symbolic link to "
        f"'{tmp_path / 'gone'}', which does not exist"
    )
    assert not (tmp_path / "gone").exists()


def test_a_second_run_on_a_live_out_is_refused_and_touches_nothing(
    stand_in_moses: Path, files: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    work = out / "systems" / "baseline" / "run1" / "mert-work"
    work.mkdir(parents=True)
    (work / "run1.moses.ini").write_text("the first run's live MERT state\n")
    with locked_out_dir(str(out)):  # the first run, alive
        before = listing(out)
        code, err = experiment(stand_in_moses, files, str(out))
        assert listing(out) == before
    assert code == 6
    assert re.fullmatch(
        rf"phrase-rescorer: error: {re.escape(str(out))}: another experiment \(PID {os.getpid()}\) "
        r"is running in this directory; wait for it to end, or give another --out",
        one_error(err),
    )


@pytest.mark.parametrize("content", ["", "[1, 2]", "{not json"])
def test_damaged_settings_json_is_a_clear_error(
    stand_in_moses: Path, files: dict[str, Path], tmp_path: Path, content: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "settings.json").write_text(content)
    code, err = experiment(stand_in_moses, files, str(out))
    assert code == 2
    assert one_error(err).startswith(f"phrase-rescorer: error: {out / 'settings.json'}: not an experiment's settings")
    assert (out / "settings.json").read_text() == content


def test_ini_with_a_relative_path_is_refused_before_any_work(
    stand_in_moses: Path, files: dict[str, Path], tmp_path: Path
) -> None:
    (tmp_path / "pt.gz").write_bytes((TINY / "phrase-table.gz").read_bytes())
    files["ini"].write_text(files["ini"].read_text().replace(str(TINY / "phrase-table.gz"), "pt.gz"))
    model = tiny_checkpoint(tmp_path / "rnn.pt", hidden=8, vocab=50)
    r = subprocess.run(
        [
            PYTHON,
            "-m",
            "phrase_rescorer",
            "-q",
            "experiment",
            "--moses",
            str(stand_in_moses),
            "--ini",
            str(files["ini"]),
            "--dev",
            str(files["dev.en"]),
            str(files["dev.fr"]),
            "--test",
            str(files["test.en"]),
            str(files["test.fr"]),
            "--target-lang",
            "fr",
            "--model",
            str(model),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        env={**cli_env(), "OMP_NUM_THREADS": "1"},
        timeout=300,
        cwd=tmp_path,
    )
    assert r.returncode == 5
    assert re.fullmatch(
        r"phrase-rescorer: error: .*moses.ini:\d+: TranslationModel0 has the relative path pt.gz: "
        r"mert-moses.pl runs the decoder in its own working directory; give the ini absolute paths",
        one_error(r.stderr.decode()),
    )
    assert not (tmp_path / "out").exists()


def test_network_candidates_without_a_forward_network_are_refused(files: dict[str, Path], tmp_path: Path) -> None:
    """--network-candidates takes the candidates of the --nmt networks that translate forward:
    without --nmt, or with an inverse network only, it is refused before any work (and
    --reached-only, --ensemble-candidates and --candidates-moses-nbest without it, the last also
    above --rerank-nbest)."""
    out, moses = tmp_path / "out", stand_in(tmp_path / "moses")
    code, err = experiment(moses, files, str(out), "--network-candidates", "3")
    assert code == 2 and one_error(err) == (
        "phrase-rescorer: error: --network-candidates needs --nmt (the networks whose candidates join Moses' lists)"
    )
    code, err = experiment(moses, files, str(out), "--reached-only")
    assert code == 2 and one_error(err) == (
        "phrase-rescorer: error: --reached-only needs --network-candidates (it keeps the candidates Moses can produce)"
    )
    inverse = tmp_path / "inverse.pt"
    argv = [PYTHON, "-m", "phrase_rescorer", "-q", "train-nmt", str(TINY / "dev.en"), str(TINY / "dev.fr")]
    argv += [str(inverse), "--max-steps", "2", *NMT_SIZES, "--valid-fraction", "0", "--direction", "inverse"]
    trained = subprocess.run(argv, capture_output=True, env=cli_env(), timeout=300)
    assert trained.returncode == 0, trained.stderr
    query = moses / "bin" / "query"  # the LM's scores of the new lines: Moses' bin/query
    query.write_text("#!/bin/sh\nexit 1\n")
    query.chmod(0o755)
    code, err = experiment(moses, files, str(out), "--nmt", str(inverse), "--network-candidates", "3")
    assert code == 2 and one_error(err) == (
        f"phrase-rescorer: error: --network-candidates: no --nmt network translates forward ({inverse}); a network "
        "of --direction inverse translates the hypothesis into the source: give the forward one"
    )
    code, err = experiment(moses, files, str(out), "--ensemble-candidates")
    assert code == 2 and one_error(err) == (
        "phrase-rescorer: error: --ensemble-candidates needs --network-candidates (the ensemble's K best join Moses' "
        "lists)"
    )
    code, err = experiment(moses, files, str(out), "--candidates-moses-nbest", "10")
    assert code == 2 and one_error(err) == (
        "phrase-rescorer: error: --candidates-moses-nbest needs --network-candidates (it says how many of Moses' "
        "hypotheses they join)"
    )
    more = ["--nmt", str(inverse), "--network-candidates", "3", "--rerank-nbest", "20", "--candidates-moses-nbest"]
    code, err = experiment(moses, files, str(out), *more, "21")
    assert code == 2 and one_error(err) == (
        "phrase-rescorer: error: --candidates-moses-nbest 21: Moses' lists hold --rerank-nbest 20: give at most that"
    )
    forward = tmp_path / "forward.pt"
    argv[argv.index(str(inverse))] = str(forward)
    trained = subprocess.run(argv[: argv.index("--direction")], capture_output=True, env=cli_env(), timeout=300)
    assert trained.returncode == 0, trained.stderr
    more = ["--nmt", str(forward), "--nmt", str(inverse), "--network-candidates", "3", "--ensemble-candidates"]
    code, err = experiment(moses, files, str(out), *more)
    assert code == 2 and one_error(err) == (
        "phrase-rescorer: error: --ensemble-candidates: 1 --nmt network translates forward; "
        "an ensemble needs two or more"
    )
    backwards = tiny_nmt(tmp_path / "r2l.pt", steps=2, right_to_left=True)  # an ensemble per order: none of two
    more = ["--nmt", str(forward), "--nmt", str(backwards), "--network-candidates", "3", "--ensemble-candidates"]
    code, err = experiment(moses, files, str(out), *more)
    assert code == 2 and one_error(err) == (
        "phrase-rescorer: error: --ensemble-candidates: no two --nmt networks that translate forward write their "
        "target in one order; an ensemble needs two or more of one order"
    )
    again = tmp_path / "forward2.pt"
    shutil.copyfile(forward, again)
    code, err = experiment(moses, files, str(out), *more, "--nmt", str(again), "--rerank-choose-leave-out", "FromNet2")
    message = one_error(err)  # two orders, a list each: FromNet0 (the left-to-right networks') and FromNet1
    assert code == 2 and message.startswith("phrase-rescorer: error: --rerank-choose-leave-out FromNet2: no reranked")
    assert message.endswith(" FromNet0 FromNet1)"), message
    assert not (out / "settings.json").exists()


def test_rerank_choose_leave_out_names_are_checked_before_any_work(files: dict[str, Path], tmp_path: Path) -> None:
    """--rerank-choose-leave-out names features of the reranked lists: without --lm or --nmt, an
    empty set, or a name no list of the experiment has (an indicator of the joined lists without
    --network-candidates) is refused before any work, naming the features it may name."""
    out, moses = tmp_path / "out", stand_in(tmp_path / "moses")
    code, err = experiment(moses, files, str(out), "--rerank-choose-leave-out", "LM0")
    assert code == 2 and one_error(err) == (
        "phrase-rescorer: error: --rerank-choose-leave-out needs --lm or --nmt (the reranked runs that choose)"
    )
    nmt = tiny_nmt(tmp_path / "nmt.pt", steps=2)
    code, err = experiment(moses, files, str(out), "--nmt", str(nmt), "--rerank-choose-leave-out", " , ")
    assert code == 2 and one_error(err) == (
        "phrase-rescorer: error: --rerank-choose-leave-out ' , ': give a feature's name, e.g. "
        "--rerank-choose-leave-out TranslationModel0"
    )
    sets = ["--rerank-choose-leave-out", "LM0,Nope", "--rerank-choose-leave-out", "FromMoses,NMT0"]
    code, err = experiment(moses, files, str(out), "--nmt", str(nmt), *sets)
    message = one_error(err)
    assert code == 2 and message.startswith(
        "phrase-rescorer: error: --rerank-choose-leave-out Nope, FromMoses: no reranked list of this experiment "
        "has such a feature (its features: "
    )
    named = message.split("(its features: ")[1].rstrip(")").split()
    assert {"LM0", "TranslationModel0", "NMT0"} <= set(named) and "FromMoses" not in named
    assert "UnknownWordPenalty0" not in named  # weighed in the ini, never written into n-best lists
    assert not out.exists()


def test_mert_moses_runs_the_decoder_in_its_working_directory() -> None:
    """The Moses line the relative-path refusal relies on (experiment/systems.py quotes it)."""
    script = moses_root(("scripts/training/mert-moses.pl",)) / "scripts/training/mert-moses.pl"
    assert 'chdir($___WORKING_DIR) or die "Can\'t chdir to $___WORKING_DIR";' in script.read_text()


def settings(files: dict[str, Path], out: Path, model: Path | None = None) -> Settings:
    return Settings(
        ini=str(files["ini"]),
        dev=(str(files["dev.en"]), str(files["dev.fr"])),
        test=(str(files["test.en"]), str(files["test.fr"])),
        out_dir=str(out),
        model=str(model) if model else None,
    )


def _change_reference(files: dict[str, Path], model: Path) -> Path:
    files["test.fr"].write_text(files["test.fr"].read_text().replace("a", "b", 1))
    return files["test.fr"]


def _change_model(files: dict[str, Path], model: Path) -> Path:
    tiny_checkpoint(model, hidden=8, vocab=50, seed=7)  # what train --resume does to MODEL.pt
    return model


def _change_ini(files: dict[str, Path], model: Path) -> Path:
    files["ini"].write_text(files["ini"].read_text() + "\n")
    return files["ini"]


def _touch_table(files: dict[str, Path], model: Path) -> Path:
    table = Path(files["ini"].read_text().split("path=")[1].split()[0])
    copy = files["ini"].parent / "pt.gz"
    copy.write_bytes(table.read_bytes())
    files["ini"].write_text(files["ini"].read_text().replace(str(table), str(copy)))
    return copy


@pytest.mark.parametrize(
    "change",
    [_change_reference, _change_model, _change_ini, _touch_table],
    ids=["test reference", "model", "ini", "a table the ini names"],
)
def test_a_restart_after_a_file_changed_is_refused(files: dict[str, Path], tmp_path: Path, change) -> None:  # type: ignore[no-untyped-def]
    model = tiny_checkpoint(tmp_path / "rnn.pt", hidden=8, vocab=50)
    out = tmp_path / "out"
    out.mkdir()
    if change is _touch_table:  # the ini names a table of its own from the start
        changed = change(files, model)
        check_resume(settings(files, out, model))
        data = bytearray(changed.read_bytes())
        data[-9] ^= 1  # rewritten in place: the same size, one byte changed
        changed.write_bytes(bytes(data))
        os.utime(changed, ns=(0, changed.stat().st_mtime_ns + 10**9))
    else:
        check_resume(settings(files, out, model))
        check_resume(settings(files, out, model))  # unchanged: continued
        changed = change(files, model)
    with pytest.raises(
        ExperimentError,
        match=r"holds an experiment whose files changed since it started "
        rf"\({re.escape(str(changed))}\)",
    ) as e:
        check_resume(settings(files, out, model))
    assert e.value.exit_code == 2
    assert "fingerprints" in json.loads((out / "settings.json").read_text())


def test_a_table_copied_without_its_times_is_continued(files: dict[str, Path], tmp_path: Path) -> None:
    """The data restored from a backup, or copied without ``-p``: the tables' modification times
    changed, their content did not. The restart rehashes them, goes on, says so once and records
    the new times (the next restart hashes nothing); an entry recorded before hashes were kept
    cannot be rechecked, and is refused as before."""
    model = tiny_checkpoint(tmp_path / "rnn.pt", hidden=8, vocab=50)
    out = tmp_path / "out"
    out.mkdir()
    table = _touch_table(files, model)
    check_resume(settings(files, out, model))
    recorded = json.loads((out / "settings.json").read_text())["fingerprints"]["ini_files"][str(table)]
    assert len(recorded) == 3 and len(recorded[2]) == 64
    os.utime(table, ns=(0, table.stat().st_mtime_ns + 10**9))
    said: list[str] = []
    check_resume(settings(files, out, model), said.append)
    assert said == [
        f"{table}: modification time changed since the experiment started, content unchanged (SHA-256): continued"
    ]
    now = json.loads((out / "settings.json").read_text())["fingerprints"]["ini_files"][str(table)]
    assert now == [recorded[0], table.stat().st_mtime_ns, recorded[2]]
    said.clear()
    check_resume(settings(files, out, model), said.append)
    assert said == []
    old = json.loads((out / "settings.json").read_text())
    old["fingerprints"]["ini_files"][str(table)] = now[:2]  # as an earlier version recorded it
    (out / "settings.json").write_text(json.dumps(old))
    os.utime(table, ns=(0, table.stat().st_mtime_ns + 10**9))
    with pytest.raises(ExperimentError, match=rf"files changed since it started \({re.escape(str(table))}\)"):
        check_resume(settings(files, out, model))


def test_a_binarized_table_directory_is_hashed_file_by_file(tmp_path: Path) -> None:
    table = tmp_path / "pt.minphr"
    (table / "sub").mkdir(parents=True)
    (table / "a").write_bytes(b"one")
    (table / "sub" / "b").write_bytes(b"two")
    first = content_sha256(str(table))
    os.utime(table / "a", ns=(0, 10**9))
    assert content_sha256(str(table)) == first  # times are not content
    (table / "sub" / "b").rename(table / "b")
    assert content_sha256(str(table)) != first  # nor is a file in another place the same table
    (table / "b").rename(table / "sub" / "b")
    assert retimed({str(table): [1, 2, first]}, {str(table): [4096, 3]}) == {str(table): [4096, 3, first]}
    (table / "a").write_bytes(b"on3")
    assert content_sha256(str(table)) != first
    assert retimed({str(table): [1, 2, first]}, {str(table): [4096, 3]}) == {}


def test_settings_json_of_an_earlier_version_gets_its_fingerprints(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    first = settings(files, out)
    (out / "settings.json").write_text(json.dumps(first.identity()))
    said: list[str] = []
    check_resume(first, said.append)
    assert "fingerprints" in json.loads((out / "settings.json").read_text()) and len(said) == 1
    _change_reference(files, tmp_path / "none.pt")
    with pytest.raises(ExperimentError, match="files changed since it started"):
        check_resume(first)


def test_sighup_is_129(
    stand_in_moses: Path,
    files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SIGHUP (the terminal closed) while the experiment runs: exit 129 and its own words, as
    the exit-code table of docs/errors.md says (it was reported as SIGTERM, 143)."""

    def hung_up(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise Terminated(signal.SIGHUP)

    monkeypatch.setattr("phrase_rescorer.cli.experiment.run_experiment", hung_up)
    monkeypatch.setattr(
        "sys.argv",
        [
            "phrase-rescorer",
            "experiment",
            "--moses",
            str(stand_in_moses),
            "--ini",
            str(files["ini"]),
            "--dev",
            str(files["dev.en"]),
            str(files["dev.fr"]),
            "--test",
            str(files["test.en"]),
            str(files["test.fr"]),
            "--out",
            str(tmp_path / "out"),
        ],
    )
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        with pytest.raises(SystemExit) as caught:
            main()
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    assert caught.value.code == 129
    assert capsys.readouterr().err.strip() == (
        f"phrase-rescorer: error: hung up (SIGHUP); the finished runs are kept in {tmp_path / 'out'}: "
        "run the same command to continue"
    )


def test_the_lock_is_the_run_s_own(tmp_path: Path) -> None:
    """Held while the run lives, given back when it ends (however it ends), recording its PID."""
    out = tmp_path / "out"
    with locked_out_dir(str(out)):
        assert (out / LOCK_NAME).read_text() == f"{os.getpid()}\n"
        with pytest.raises(ExperimentError, match="another experiment"), locked_out_dir(str(out)):
            pass
    with locked_out_dir(str(out)):
        pass
    assert runner.locked_out_dir is locked_out_dir


def test_a_real_sighup_during_tuning_is_129(stand_in_moses: Path, files: dict[str, Path], tmp_path: Path) -> None:
    """SIGHUP while mert-moses.pl runs (a stand-in that waits): the tuner's process group is
    stopped, the run ends with 129 and says it was hung up."""
    moses = tmp_path / "moses"
    for relative in EXPERIMENT_NEEDS:
        (moses / relative).parent.mkdir(parents=True, exist_ok=True)
        (moses / relative).write_bytes((stand_in_moses / relative).read_bytes())
        (moses / relative).chmod(0o755)
    (moses / "scripts/training/mert-moses.pl").write_text('#!/bin/sh\ntouch "$MARK"\nexec sleep 300\n')
    mark, out = tmp_path / "tuning", tmp_path / "out"
    args = [
        "--moses",
        str(moses),
        "--ini",
        str(files["ini"]),
        "--dev",
        str(files["dev.en"]),
        str(files["dev.fr"]),
        "--test",
        str(files["test.en"]),
        str(files["test.fr"]),
        "--target-lang",
        "fr",
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(
        [PYTHON, "-m", "phrase_rescorer", "-q", "experiment", *args],
        stderr=subprocess.PIPE,
        env={**cli_env(), "OMP_NUM_THREADS": "1", "MARK": str(mark)},
    )
    try:
        for _ in range(1200):
            if mark.exists() or proc.poll() is not None:
                break
            select_wait(0.1)
        assert mark.exists(), proc.stderr.read().decode() if proc.poll() is not None and proc.stderr else ""
        proc.send_signal(signal.SIGHUP)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 129, err.decode()
    assert one_error(err.decode()) == (
        f"phrase-rescorer: error: hung up (SIGHUP); the finished runs are kept in "
        f"{out}: run the same command to continue"
    )


def select_wait(seconds: float) -> None:
    select.select([], [], [], seconds)
