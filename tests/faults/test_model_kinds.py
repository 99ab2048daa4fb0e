"""A model file given where another kind is wanted: the one check of a model file's kind (phrase
network, translation network, CSLM) and direction (forward, inverse), made by every command that
takes a model before any work, exit 4 and one line saying what the file is, which commands take
it and what the option takes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from phrase_rescorer.model.kinds import TAKES, describe_kind, taken_by
from tests.faults.conftest import TINY
from tests.faults.test_experiment_faults import experiment
from tests.helpers.cli_run import run_cli
from tests.helpers.cslm import tiny_lm
from tests.helpers.nmt import tiny_nmt
from tests.helpers.paths import SAMPLE
from tests.helpers.rescore_data import tiny_checkpoint


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("kinds")
    forward = tiny_checkpoint(d / "forward.pt", hidden=8, vocab=60)
    payload = torch.load(forward, weights_only=True)
    payload["info"] = {**payload["info"], "direction": "inverse", "trained_on": "phrase pairs"}
    torch.save(payload, d / "inverse.pt")
    nmt = tiny_nmt(d / "nmt.pt", steps=2)
    payload = torch.load(nmt, weights_only=True)
    payload["info"] = {**payload["info"], "direction": "inverse"}
    torch.save(payload, d / "nmt-inverse.pt")
    return {
        "forward": forward,
        "inverse": d / "inverse.pt",
        "nmt": nmt,
        "nmt-inverse": d / "nmt-inverse.pt",
        "cslm": tiny_lm(d / "cslm.pt", steps=2),
    }


def test_each_file_says_its_kind(models: dict[str, Path]) -> None:
    from phrase_rescorer.model.kinds import check_kind, describe_kind, open_model

    assert {name: open_model(str(p)).kind for name, p in models.items()} == {
        "forward": ("phrase", "forward"),
        "inverse": ("phrase", "inverse"),
        "nmt": ("sentence", "forward"),
        "nmt-inverse": ("sentence", "inverse"),
        "cslm": ("cslm", "forward"),
    }
    assert (
        describe_kind(("phrase", "inverse")) == "an inverse phrase network (phrase-rescorer train --direction inverse)"
    )
    check_kind(str(models["inverse"]), "X", ("phrase",), ("inverse",))
    with pytest.raises(
        ValueError, match=r"forward.pt: a phrase network \(phrase-rescorer train\), for .*; X takes an inverse"
    ):
        check_kind(str(models["forward"]), "X", ("phrase",), ("inverse",))


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        (
            "cslm",
            r"a CSLM \(phrase-rescorer train-lm\), for phrase-rescorer score -m, nbest -m, bundle -m, experiment --lm;",
        ),
        (
            "nmt",
            r"a translation network \(phrase-rescorer train-nmt\), for phrase-rescorer suggest -m, compare -m, "
            r"embed -m, translate -m, average, score -m, nbest -m, bundle -m, bundle --candidates, experiment --nmt; "
            r"rescore-phrase-table --model takes a phrase network",
        ),
    ],
)
def test_rescore_given_a_sentence_model_says_what_it_is(
    kind: str,
    message: str,
    models: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out.gz"
    code, err = run_cli(["rescore", str(SAMPLE), str(out), "-m", str(models[kind])], monkeypatch, capsys)
    assert code == 4 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"phrase-rescorer: error: {models[kind]}: ") and re.search(message, err), err
    assert not out.exists()


NETWORKS = r"a phrase network \(phrase-rescorer train\) or a translation network \(phrase-rescorer train-nmt\)"


@pytest.mark.parametrize(
    ("command", "kind", "wanted"),
    [
        ("translate", "cslm", rf"phrase-rescorer translate -m takes {NETWORKS}$"),
        ("average", "cslm", rf"phrase-rescorer average takes {NETWORKS}$"),
        ("average-last", "cslm", rf"phrase-rescorer average --average-last takes {NETWORKS}$"),
        ("inspect", "nmt", r"phrase-rescorer inspect -m takes a phrase network \(phrase-rescorer train\)$"),
        ("inspect", "cslm", r"phrase-rescorer inspect -m takes a phrase network \(phrase-rescorer train\)$"),
        ("suggest", "cslm", rf"phrase-rescorer suggest -m takes {NETWORKS}$"),
    ],
)
def test_each_command_says_what_the_file_is_and_what_it_takes(
    command: str,
    kind: str,
    wanted: str,
    models: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A file of another kind: exit 4 and one line, the file, what it is, and what the command's
    option takes, before any output is written."""
    given, out = models[kind], tmp_path / "out"
    if command == "average-last":  # the .last.pt of a train-lm run
        given = tmp_path / "run.last.pt"
        given.write_bytes(models[kind].read_bytes())
    args = {
        "translate": ["translate", str(SAMPLE), str(out), "-m", str(given)],
        "average": ["average", str(out), str(given), str(given)],
        "average-last": ["average", str(out), "--average-last", "1", str(tmp_path / "run.pt")],
        "inspect": ["inspect", str(SAMPLE), "-m", str(given)],
        "suggest": ["suggest", "-m", str(given), "--table", str(SAMPLE), "maison"],
    }[command]
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 4 and len(err.strip().splitlines()) == 1, err
    what = {"nmt": "a translation network", "cslm": "a CSLM"}[kind]
    assert err.startswith(f"phrase-rescorer: error: {given}: {what} ") and re.search(wanted, err.strip()), err
    assert not out.exists()


@pytest.mark.parametrize(
    ("option", "kind", "wanted"),
    [
        ("--model", "inverse", "experiment -m/--model takes a phrase network"),
        ("--model", "nmt", "experiment -m/--model takes a phrase network"),
        ("--inverse-model", "forward", "experiment --inverse-model takes an inverse phrase network"),
        ("--nmt", "forward", "experiment --nmt takes a translation network"),
        ("--nmt", "cslm", "experiment --nmt takes a translation network"),
        ("--lm", "nmt", "experiment --lm takes a CSLM"),
    ],
)
def test_experiment_checks_every_model_before_any_work(
    option: str,
    kind: str,
    wanted: str,
    models: dict[str, Path],
    stand_in_moses: Path,
    files: dict[str, Path],
    tmp_path: Path,
) -> None:
    extra = [option, str(models[kind])]
    if option == "--inverse-model":
        extra += ["--model", str(models["forward"])]
    out = tmp_path / "exp"
    code, err = experiment(stand_in_moses, files, str(out), *extra)
    assert code == 4 and len(err.strip().splitlines()) == 1, err
    assert f"{models[kind]}: " in err and wanted in err, err
    assert not out.exists()


def test_every_nmt_network_is_checked_and_each_given_once(
    models: dict[str, Path], stand_in_moses: Path, files: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "exp"
    code, err = experiment(stand_in_moses, files, str(out), "--nmt", str(models["nmt"]), "--nmt", str(models["cslm"]))
    assert code == 4 and len(err.strip().splitlines()) == 1, err
    assert f"{models['cslm']}: " in err and "experiment --nmt takes a translation network" in err, err
    code, err = experiment(stand_in_moses, files, str(out), "--nmt", str(models["nmt"]), "--nmt", str(models["nmt"]))
    twice = "phrase-rescorer: error: --nmt given the same file twice: give each network once"
    assert code == 2 and err.strip() == twice, err
    assert not out.exists()


#: Each file's kind (``kinds.ModelKind``).
KINDS = {
    "forward": ("phrase", "forward"),
    "inverse": ("phrase", "inverse"),
    "nmt": ("sentence", "forward"),
    "nmt-inverse": ("sentence", "inverse"),
    "cslm": ("cslm", "forward"),
}


def test_every_model_option_is_in_takes() -> None:
    """Every command's ``-m/--model`` has its entry in ``kinds.TAKES``, from which every refusal
    of a model file says which options take it (the options of other names are listed by hand)."""
    from phrase_rescorer.cli import cli

    commands = sorted(name for name, command in cli.commands.items() if any("-m" in p.opts for p in command.params))
    missing = [name for name in commands if not any(o.startswith(f"phrase-rescorer {name} -m") for o in TAKES)]
    assert len(commands) >= 10 and not missing, missing


def show_weights_moses(root: Path) -> Path:
    """A stand-in Moses whose ``bin/moses -show-weights`` prints the features LM0 and WordPenalty0."""
    (root / "bin").mkdir(parents=True)
    decoder = root / "bin" / "moses"
    decoder.write_text("#!/bin/sh\nprintf 'LM0= 0.5\\nWordPenalty0= -1\\n'\n")
    decoder.chmod(0o755)
    return root


def command_line(option: str, given: str, tmp_path: Path, moses: Path, files: dict[str, Path]) -> list[str]:
    """A run of ``option`` (of ``kinds.TAKES``) given the model file ``given``, on the tiny
    system, that succeeds (``experiment``: refused for want of a target language, after the checks
    of its models)."""
    table, out = str(TINY / "phrase-table.gz"), str(tmp_path / "out")
    source, target = str(files["dev.en"]), str(files["dev.fr"])
    if option == "phrase-rescorer moses-step -m":  # the tiny system's ini and table, in a directory of the test's
        model_dir = tmp_path / "model"
        model_dir.mkdir()
        (model_dir / "moses.ini").write_text(files["ini"].read_text().replace(str(TINY), str(model_dir)))
        for name in ("phrase-table.gz", "lm.fr.3gram.arpa.gz"):
            (model_dir / name).write_bytes((TINY / name).read_bytes())
        return ["moses-step", str(model_dir), "-m", given, "--moses", str(moses)]
    if option.startswith("phrase-rescorer experiment "):
        extra = [option.split()[-1].split("/")[-1], given]
        if option.endswith("--inverse-model"):
            extra += ["--model", str(Path(given).parent / "forward.pt")]
        dev, test = [str(files["dev.en"]), str(files["dev.fr"])], [str(files["test.en"]), str(files["test.fr"])]
        return ["experiment", "--moses", str(moses), "--ini", str(files["ini"]), "--dev", *dev, "--test", *test,
                "--out", out, *extra]  # fmt: skip
    if option.startswith("phrase-rescorer bundle "):  # weights of the bundle's features
        if option.endswith("--candidates"):
            added = "FromMoses= 1\nFromNet0= 1\n"
        else:
            added = "CSLM0= 0.1\n" if "cslm" in given else "NMT0= 0.1\n"
        weights = tmp_path / "rerank.weights"
        weights.write_text("[weight]\nLM0= 0.5\nWordPenalty0= -1\n" + added)
        return ["bundle", out, "--ini", str(files["ini"]), "--weights", str(weights), option.split()[-1], given,
                "--moses", str(show_weights_moses(tmp_path / "moses"))]  # fmt: skip
    nbest = tmp_path / "in.nbest"
    nbest.write_text("".join(f"{i} ||| la maison . ||| LM0= -10.5 ||| -3.7\n" for i in range(8)))
    return {
        "phrase-rescorer rescore -m": ["rescore", table, f"{out}.gz", "-m", given],
        "phrase-rescorer inspect -m": ["inspect", table, "-m", given],
        "phrase-rescorer suggest -m": ["suggest", "-m", given, "--table", table, "--raw", "la maison"],
        "phrase-rescorer compare -m": [
            "compare",
            "-m",
            given,
            "-t",
            table,
            "--raw",
            "--source",
            "young boy",
            "--source",
            "de",
        ],
        "phrase-rescorer embed -m": ["embed", "-m", given, "-o", out, "--raw", "--phrase", "the house"],
        "phrase-rescorer translate -m": ["translate", source, out, "-m", given, "--max-length", "3"],
        "phrase-rescorer average": ["average", f"{out}.pt", given, given],
        "phrase-rescorer score -m": [
            "score",
            *([target] if "cslm" in given else [source, target]),
            "-m",
            given,
            "-o",
            out,
        ],  # fmt: skip
        "phrase-rescorer nbest -m": ["nbest", str(nbest), out, "-m", given, "--source", source],
    }[option]


@pytest.mark.parametrize("option", list(TAKES))
def test_each_option_takes_the_kinds_refusals_say_it_takes(
    option: str,
    models: dict[str, Path],
    stand_in_moses: Path,
    files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``kinds.TAKES``, from which every refusal of a model file says which options take it, is
    what each option takes: a file of a kind it names runs, any other is refused (exit 4), and
    the refusal names every option of ``TAKES`` that takes it."""
    families, directions = TAKES[option]
    for name, kind in KINDS.items():
        given = str(models[name])
        work = tmp_path / name
        work.mkdir()
        code, err = run_cli(["-q", *command_line(option, given, work, stand_in_moses, files)], monkeypatch, capsys)
        if kind[0] in families and (kind[0] == "cslm" or kind[1] in directions):
            ran = (code, "the target language is unknown" in err) == (2, True) if "experiment" in option else code == 0
            assert ran, f"{option} refused {name}: {err}"
        else:
            assert code == 4 and len(err.strip().splitlines()) == 1, (name, err)
            said = f"{given}: {describe_kind(kind)}, for {taken_by(kind)}; "
            assert said in err and re.search(r"takes an? .*\)$", err.strip()), (name, err)
