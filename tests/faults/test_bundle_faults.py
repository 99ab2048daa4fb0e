"""``bundle`` and ``translate-hybrid`` refusals, each one line and its exit code, before any work:
weights that do not name the bundle's features, an output directory in use, a relative ini path;
a bundle whose network, copy or ini-named file changed or went missing. And an interrupted
``translate-hybrid``: no output, its decoder stopped.

The decoder is a stand-in (``bin/moses``, a shell script): ``-show-weights`` prints a feature
list as Moses does; decoding records its process ID and fails at once, or waits to be stopped
while ``decoder.wait`` exists beside it; no real Moses is needed. Another stand-in writes an
n-best list with a malformed line, whose refusal names the input line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from phrase_rescorer.errors import EXIT_INI, EXIT_INPUT, EXIT_MODEL, EXIT_OS, EXIT_SIGINT, EXIT_USAGE, HostError
from phrase_rescorer.hybrid.bundle_read import BundleError, read_bundle
from phrase_rescorer.model.checkpoint import RIGHT_TO_LEFT, load_checkpoint, save_checkpoint
from tests.helpers.cli_run import run_cli, subprocess_env
from tests.helpers.cslm import tiny_lm
from tests.helpers.nan_networks import nan_copy
from tests.helpers.nmt import tiny_nmt
from tests.helpers.paths import PYTHON, sigint_as_at_a_terminal
from tests.helpers.rescore_data import tiny_checkpoint

#: What the stand-in decoder prints for -show-weights (the untuneable feature is left out of lists).
SHOW_WEIGHTS = (
    "Distortion0= 0.3\nLM0= 0.5\nUnknownWordPenalty0 UNTUNEABLE\nWordPenalty0= -1\nTranslationModel0= 0.2 0.2\n"
)
WEIGHTS = "[weight]\nDistortion0= 0.3\nLM0= 0.5\nWordPenalty0= -1\nTranslationModel0= 0.2 0.2\nCSLM0= 0.1\n"


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A stand-in Moses, an ini naming a table, weights, a tiny CSLM."""
    tmp = tmp_path_factory.mktemp("bundle")
    moses = tmp / "moses"
    (moses / "bin").mkdir(parents=True)
    decoder = moses / "bin" / "moses"
    show = SHOW_WEIGHTS.replace("\n", "\\n")
    decoder.write_text(
        "#!/bin/sh\n"
        f'case " $* " in *" -show-weights "*) printf \'{show}\'; exit 0;; esac\n'
        f'echo $$ > "{tmp}/decoder.pid"\n'
        f'if [ -e "{tmp}/decoder.wait" ]; then exec sleep 600; fi\n'
        'echo "stand-in decoder: no decoding" >&2; exit 1\n'
    )
    decoder.chmod(0o755)
    table = tmp / "phrase-table.gz"
    table.write_bytes(b"not read by the stand-in\n")
    ini = tmp / "moses.ini"
    ini.write_text(f"[feature]\nPhraseDictionaryMemory name=TranslationModel0 num-features=2 path={table}\n")
    weights = tmp / "rerank.weights"
    weights.write_text(WEIGHTS)
    return {"moses": moses, "ini": ini, "weights": weights, "table": table, "cslm": tiny_lm(tmp / "cslm.pt", steps=5),
            "nmt": tiny_nmt(tmp / "nmt.pt", steps=2)}  # fmt: skip


def bundle_args(system: dict[str, Path], directory: Path, *more: str) -> list[str]:
    return ["bundle", str(directory), "--ini", str(system["ini"]), "--weights", str(system["weights"]),
            "-m", str(system["cslm"]), "--moses", str(system["moses"]), *more]  # fmt: skip


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def made(system: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> dict[str, Path]:
    """A bundle of its own copies of the system's files (a test may change them)."""
    own = {}
    for key in ("ini", "weights", "cslm", "table"):
        own[key] = tmp_path / system[key].name
        own[key].write_bytes(system[key].read_bytes())
    own["ini"].write_text(system["ini"].read_text().replace(str(system["table"]), str(own["table"])))
    own["moses"] = system["moses"]
    directory = tmp_path / "hybrid"
    code, err = run_cli(bundle_args(own, directory), monkeypatch, capsys)
    assert code == 0, err
    (tmp_path / "in.txt").write_text("a b\n")
    return {**own, "bundle": directory, "in": tmp_path / "in.txt", "out": tmp_path / "out.txt"}


def translate(made: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys) -> tuple[int, str]:
    args = ["translate-hybrid", str(made["bundle"]), str(made["in"]), str(made["out"]), "--moses", str(made["moses"])]
    return run_cli(args, monkeypatch, capsys)


def test_weights_naming_a_feature_the_bundle_lacks(system, tmp_path: Path, monkeypatch, capsys) -> None:
    weights = tmp_path / "w"
    weights.write_text(WEIGHTS + "NMT0= 0.2\n")
    directory = tmp_path / "hybrid"
    args = bundle_args({**system, "weights": weights}, directory)
    code, err = run_cli(args, monkeypatch, capsys)
    line = one_line(err)
    assert code == EXIT_USAGE, err
    assert f"{weights}: weights for the feature NMT0, which the n-best list lacks" in line
    assert "(the bundle's lists: features Distortion0(1) LM0(1) WordPenalty0(1) TranslationModel0(2) CSLM0(1))" in line
    assert os.listdir(tmp_path) == ["w"]  # no bundle, no temporary


def test_weights_lacking_a_feature_of_the_bundle(system, tmp_path: Path, monkeypatch, capsys) -> None:
    """Weights tuned without the candidates' indicators, for a bundle with candidates."""
    directory = tmp_path / "hybrid"
    args = bundle_args(system, directory, "--candidates", str(system["nmt"]))
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == EXIT_USAGE, err
    assert f"{system['weights']}: no weights for the features FromMoses, FromNet0 of the n-best list" in one_line(err)
    assert not directory.exists()


def test_a_cslm_as_candidates_is_refused(system, tmp_path: Path, monkeypatch, capsys) -> None:
    directory = tmp_path / "hybrid"
    code, err = run_cli(bundle_args(system, directory, "--candidates", str(system["cslm"])), monkeypatch, capsys)
    assert code == EXIT_MODEL and "phrase-rescorer bundle --candidates" in one_line(err), err
    assert not directory.exists()


def test_a_directory_in_use_is_refused(system, tmp_path: Path, monkeypatch, capsys) -> None:
    directory = tmp_path / "hybrid"
    directory.mkdir()
    (directory / "kept").write_text("mine\n")
    code, err = run_cli(bundle_args(system, directory), monkeypatch, capsys)
    assert code == EXIT_OS and "exists and is not an empty directory" in one_line(err), err
    assert os.listdir(directory) == ["kept"]


def test_a_relative_ini_path_is_refused(system, tmp_path: Path, monkeypatch, capsys) -> None:
    ini = tmp_path / "moses.ini"
    ini.write_text("[feature]\nPhraseDictionaryMemory name=TranslationModel0 num-features=2 path=model/pt.gz\n")
    code, err = run_cli(bundle_args({**system, "ini": ini}, tmp_path / "hybrid"), monkeypatch, capsys)
    assert code == EXIT_INI, err
    assert f"{ini}:2: TranslationModel0 path=model/pt.gz is relative" in one_line(err)


@pytest.mark.parametrize("kind", ["an inverse translation network", "a phrase network"])
def test_a_network_that_gives_no_candidates_is_refused(system, tmp_path: Path, monkeypatch, capsys, kind) -> None:
    """An inverse translation network would propose source-language candidates, a phrase network
    none of sentences: ``bundle --candidates`` takes a forward translation network (``kinds.TAKES``)."""
    network = tmp_path / "network.pt"
    if kind == "a phrase network":
        tiny_checkpoint(network, hidden=8, vocab=60)
    else:
        payload = torch.load(system["nmt"], weights_only=True)
        payload["info"] = {**payload["info"], "direction": "inverse"}
        torch.save(payload, network)
    (tmp_path / "w").write_text(WEIGHTS + "FromMoses= 1\nFromNet0= 1\n")
    directory = tmp_path / "hybrid"
    args = bundle_args({**system, "weights": tmp_path / "w"}, directory, "--candidates", str(network))
    code, err = run_cli(args, monkeypatch, capsys)
    line = one_line(err)
    assert code == EXIT_MODEL, err
    assert line.startswith(f"phrase-rescorer: error: {network}: {kind} ") and line.endswith(
        "; phrase-rescorer bundle --candidates takes a translation network (phrase-rescorer train-nmt)"
    ), line
    assert not directory.exists()


def test_an_ini_path_of_no_file_is_refused(system, tmp_path: Path, monkeypatch, capsys) -> None:
    """A path= that is no file (nor a stem's .gz, a binarized table's files, a directory) would be
    left out of the files translate-hybrid checks: refused, its line named (exit 5)."""
    ini = tmp_path / "moses.ini"
    missing = tmp_path / "model" / "phrase-table"
    ini.write_text(f"[feature]\nPhraseDictionaryMemory name=TranslationModel0 num-features=2 path={missing}\n")
    directory = tmp_path / "hybrid"
    code, err = run_cli(bundle_args({**system, "ini": ini}, directory), monkeypatch, capsys)
    assert code == EXIT_INI, err
    assert one_line(err).startswith(
        f"phrase-rescorer: error: {ini}:2: TranslationModel0 path={missing}: no such file (nor {missing}.gz, "
    ), err
    assert not directory.exists()


@pytest.mark.parametrize("form", ["directory", "binlexr"])
def test_a_file_of_a_table_of_several_files_is_checked(system, tmp_path: Path, monkeypatch, capsys, form: str) -> None:
    """A table of several files, a directory (ProbingPT) or a binarized reordering table of the
    older format (``PATH.binlexr.*``): each file is recorded, and one rewritten (the same size, a
    new modification time, so its content is hashed again) is refused by translate-hybrid, naming it."""
    model = tmp_path / "model"
    model.mkdir()
    if form == "directory":
        path = model / "probing"
        (path / "sub").mkdir(parents=True)
        files = [path / "binlm.bin", path / "config", path / "sub" / "source.dat"]
        line = f"ProbingPT name=TranslationModel0 num-features=2 path={path}"
    else:
        path = model / "reordering-table"
        files = [model / f"reordering-table.binlexr.{s}" for s in ("idx", "srctree", "tgtdata", "voc0", "voc1")]
        line = f"LexicalReordering name=LexicalReordering0 num-features=6 type=msd-bidirectional-fe path={path}"
    for file in files:
        file.write_text("table\n")
    ini = tmp_path / "moses.ini"
    ini.write_text(f"[feature]\n{line}\n")
    made = {**system, "ini": ini, "bundle": tmp_path / "hybrid", "in": tmp_path / "in.txt", "out": tmp_path / "o"}
    made["in"].write_text("a b\n")
    code, err = run_cli(bundle_args(made, made["bundle"]), monkeypatch, capsys)
    assert code == 0, err
    recorded = json.loads((made["bundle"] / "bundle.json").read_text())["ini_files"]
    assert [entry["path"] for entry in recorded] == sorted(map(str, files))
    changed = files[-1]
    changed.write_text("TABLE\n")
    info = changed.stat()
    os.utime(changed, ns=(info.st_atime_ns, info.st_mtime_ns + 10**9))
    code, err = translate(made, monkeypatch, capsys)
    assert code == EXIT_USAGE, err
    assert f"{changed}: changed since the bundle was written (its content (SHA-256) differs" in one_line(err)


def test_a_missing_parent_directory_is_refused_first(system, tmp_path: Path, monkeypatch, capsys) -> None:
    """DIR in no directory: refused before any model is read (here, one that is no model file),
    naming DIR, not a temporary beside it."""
    directory = tmp_path / "nodir" / "hybrid"
    not_a_model = tmp_path / "not-a-model.pt"
    not_a_model.write_text("no model\n")
    code, err = run_cli([*bundle_args(system, directory), "-m", str(not_a_model)], monkeypatch, capsys)
    assert code == EXIT_OS, err
    assert one_line(err) == f"phrase-rescorer: error: {directory}: its directory {directory.parent} does not exist"


def candidate_system(system: dict[str, Path], tmp_path: Path) -> dict[str, Path]:
    """The system with an ini whose KENLM feature LM0 names an n-gram LM, and weights with the
    candidates' indicators."""
    lm = tmp_path / "lm.arpa"
    lm.write_text("not read by bundle\n")
    ini = tmp_path / "moses.ini"
    ini.write_text(system["ini"].read_text() + f"KENLM name=LM0 factor=0 path={lm} order=3\n")
    weights = tmp_path / "w"
    weights.write_text(WEIGHTS + "FromMoses= 1\nFromNet0= 1\n")
    return {**system, "ini": ini, "weights": weights, "lm": lm}


def test_candidates_get_the_lm_of_the_ini(system, tmp_path: Path, monkeypatch, capsys) -> None:
    """--candidates without --lm: the new candidates' LM0 is that of the ini's KENLM feature (as
    experiment --network-candidates takes it), said on stderr, not 0 beside Moses' values."""
    own = candidate_system(system, tmp_path)
    directory = tmp_path / "hybrid"
    code, err = run_cli(bundle_args(own, directory, "--candidates", str(system["nmt"])), monkeypatch, capsys)
    assert code == 0, err
    assert f"the candidates' LM0: the n-gram LM {own['lm']} of the ini's LM0 feature" in err
    record = json.loads((directory / "bundle.json").read_text())
    assert record["ngram_lm"]["path"] == str(own["lm"]) and record["lm_feature"] == "LM0"
    assert record["version"] == 1 and record["candidates"]["reached_only"] is False


def test_reached_only_is_recorded_and_needs_weights_tuned_with_constrained_decoding(
    system, tmp_path: Path, monkeypatch, capsys
) -> None:
    """--reached-only: refused for weights that name no MosesReached (tuned on lists merged
    without constrained decoding); recorded, with constrained decoding, for weights that do."""
    own = candidate_system(system, tmp_path)
    directory = tmp_path / "hybrid"
    args = bundle_args(own, directory, "--candidates", str(system["nmt"]), "--reached-only")
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == EXIT_USAGE and "the weights name no MosesReached" in one_line(err), err
    assert not directory.exists()
    own["weights"].write_text(own["weights"].read_text() + "MosesReached= 1\n")
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 0, err
    record = json.loads((directory / "bundle.json").read_text())
    assert record["candidates"]["constrained"] is True and record["candidates"]["reached_only"] is True
    assert record["version"] == 2  # a reader of version 1 would merge every candidate: it refuses the bundle
    assert read_bundle(str(directory)).candidates.reached_only  # type: ignore[union-attr]
    for change, message in (
        ({"version": 7}, "format version 7, this program reads versions 1, 2, 3, 4, 5, 6"),
        ({"candidates": {**record["candidates"], "constrained": False}}, "without constrained decoding"),
    ):
        (directory / "bundle.json").write_text(json.dumps({**record, **change}))
        with pytest.raises(BundleError, match=message):
            read_bundle(str(directory), verify=False)


def test_weights_of_the_other_ensemble_choice_are_refused_with_the_option_to_give(
    system, tmp_path: Path, monkeypatch, capsys
) -> None:
    """Two --candidates: weights naming FromNet0 alone were tuned on one ensemble's list (give
    --ensemble); naming FromNet1 too, on a list per network (leave it out). The ensemble bundle is
    format version 3, and a record of an earlier version that says ensemble is refused."""
    own = candidate_system(system, tmp_path)  # weights: FromMoses, FromNet0
    directory = tmp_path / "hybrid"
    twice = bundle_args(own, directory, "--candidates", str(system["nmt"]), "--candidates", str(system["nmt"]))
    code, err = run_cli(twice, monkeypatch, capsys)
    assert code == EXIT_USAGE and one_line(err).endswith(
        f"{own['weights']}: the weights name FromNet0 alone: tuned on one list of the candidate networks' ensemble "
        "(translate -m A -m B): give --ensemble"
    ), err
    code, err = run_cli([*twice, "--ensemble"], monkeypatch, capsys)
    assert code == 0, err
    assert "2 candidate network(s) as one ensemble of beam 5, 5 in all" in err
    record = json.loads((directory / "bundle.json").read_text())
    assert record["version"] == 3 and record["candidates"]["ensemble"] is True
    assert read_bundle(str(directory)).candidates.lists == 1  # type: ignore[union-attr]
    (directory / "bundle.json").write_text(json.dumps({**record, "version": 1}))
    with pytest.raises(BundleError, match="format version 1 and its candidates' settings disagree"):
        read_bundle(str(directory), verify=False)
    own["weights"].write_text(own["weights"].read_text() + "FromNet1= 1\n")
    code, err = run_cli(bundle_args(own, tmp_path / "other", *twice[-4:], "--ensemble"), monkeypatch, capsys)
    assert code == EXIT_USAGE and "the weights name FromNet1: tuned on a list per candidate network" in err, err
    assert "leave out --ensemble" in one_line(err) and not (tmp_path / "other").exists()


def test_the_decoder_s_first_n_joined_is_recorded_as_version_4_and_at_most_its_nbest(
    system, tmp_path: Path, monkeypatch, capsys
) -> None:
    """--moses-nbest N: refused above --nbest (before anything is written); recorded, in format
    version 4 (an earlier reader would join the candidates to the whole list), and a record that
    disagrees (an earlier version, N above the n-best size, N no whole number) is refused."""
    own = candidate_system(system, tmp_path)
    directory = tmp_path / "hybrid"
    args = bundle_args(own, directory, "--candidates", str(system["nmt"]), "--nbest", "20", "--moses-nbest")
    code, err = run_cli([*args, "21"], monkeypatch, capsys)
    assert code == EXIT_USAGE and "the decoder's first 21 hypotheses of a sentence, but its lists hold 20" in one_line(
        err
    ), err
    assert not directory.exists()
    code, err = run_cli([*args, "10"], monkeypatch, capsys)
    assert code == 0, err
    assert "the decoder's 20-best lists (the first 10 of a sentence joined by the candidates)" in err
    record = json.loads((directory / "bundle.json").read_text())
    assert record["version"] == 4 and record["candidates"]["moses_nbest"] == 10
    assert read_bundle(str(directory)).candidates.moses_nbest == 10  # type: ignore[union-attr]
    for change, message in (
        ({"version": 3}, "format version 3 and its candidates' settings disagree"),
        ({"nbest": 5}, "its candidates join the decoder's first 10 hypotheses of a sentence, its lists hold 5"),
        ({"candidates": {**record["candidates"], "moses_nbest": "10"}}, "not a complete bundle record"),
        ({"candidates": {**record["candidates"], "moses_nbest": True}}, "moses_nbest is True, not a whole number"),
    ):
        (directory / "bundle.json").write_text(json.dumps({**record, **change}))
        with pytest.raises(BundleError, match=message):
            read_bundle(str(directory), verify=False)


def test_an_lm_not_that_of_the_ini_is_refused(system, tmp_path: Path, monkeypatch, capsys) -> None:
    own = candidate_system(system, tmp_path)
    other = tmp_path / "other.arpa"
    other.write_text("another LM\n")
    directory = tmp_path / "hybrid"
    args = bundle_args(own, directory, "--candidates", str(system["nmt"]), "--lm", str(other))
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == EXIT_USAGE, err
    assert one_line(err).startswith(
        f"phrase-rescorer: error: --lm {other} is not the file of {own['ini']}:3: LM0 path={own['lm']}: "
    ), err
    assert not directory.exists()


@pytest.mark.parametrize(
    ("more", "message"),
    [
        (["--candidates", "x.pt", "--beam-size", "3", "--candidate-nbest", "5"], "--candidate-nbest 5: the beam"),
        (["--candidate-nbest", "2"], "--candidate-nbest without --candidates"),
        (["--lm", "lm.arpa"], "--lm without --candidates"),
        (["--beam-size", "3"], "--beam-size without --candidates"),
        (["--length-alpha", "1"], "--length-alpha without --candidates"),
        (["--reached-only"], "--reached-only without --candidates"),
        (["--moses-nbest", "10"], "--moses-nbest without --candidates"),
        (["--candidates", "x.pt", "--ensemble"], "--ensemble needs two --candidates or more"),
    ],
)
def test_refused_options(system, tmp_path: Path, monkeypatch, capsys, more: list[str], message: str) -> None:
    (tmp_path / "lm.arpa").write_text("")
    monkeypatch.chdir(tmp_path)
    code, err = run_cli(bundle_args(system, tmp_path / "hybrid", *more), monkeypatch, capsys)
    assert code == EXIT_USAGE and message in one_line(err), err
    assert not (tmp_path / "hybrid").exists()


def test_networks_of_both_orders_make_an_ensemble_per_order_and_none_of_two_is_refused(
    system, tmp_path: Path, monkeypatch, capsys
) -> None:
    """--ensemble of a network and its right-to-left twin alone: no two write in one order, one line
    (exit 2), no bundle. With a second left-to-right network: an ensemble per order (FromNet0 the
    left-to-right networks', FromNet1 the right-to-left one's), format version 5 recording which
    network is in which; weights of the other choice refused with the option to give; a record
    whose ensembles do not hold each network once, or of an earlier version, refused."""
    loaded = load_checkpoint(str(system["nmt"]))
    backwards = tmp_path / "rl.pt"
    save_checkpoint(str(backwards), loaded.build_model(), loaded.src_vocab, loaded.tgt_vocab,
                    info={**loaded.info, "target_order": RIGHT_TO_LEFT})  # fmt: skip
    own = candidate_system(system, tmp_path)  # weights: FromMoses, FromNet0
    directory = tmp_path / "hybrid"
    pair = bundle_args(own, directory, "--candidates", str(system["nmt"]), "--candidates", str(backwards))
    code, err = run_cli([*pair, "--ensemble"], monkeypatch, capsys)
    assert code == EXIT_USAGE, err
    assert "--ensemble: no two --candidates write their target in one order" in one_line(err)
    assert not directory.exists()
    own["weights"].write_text(own["weights"].read_text() + "FromNet1= 1\n")
    three = [*pair, "--candidates", str(system["nmt"])]
    code, err = run_cli(three, monkeypatch, capsys)
    assert code == EXIT_USAGE and one_line(err).endswith(
        f"{own['weights']}: the weights name FromNet0 to FromNet1 alone: tuned on a list per target order's ensemble "
        "(translate -m A -m B): give --ensemble"
    ), err
    code, err = run_cli([*three, "--ensemble"], monkeypatch, capsys)
    assert code == 0, err
    assert "3 candidate network(s) as an ensemble per target order of beam 5, 5 each" in err
    record = json.loads((directory / "bundle.json").read_text())
    assert record["version"] == 5 and record["candidates"]["ensembles"] == [[0, 2], [1]]
    assert read_bundle(str(directory)).candidates.beams == ((0, 2), (1,))  # type: ignore[union-attr]
    for change, message in (
        ({"candidates": {**record["candidates"], "ensembles": [[0, 1, 2]]}}, "not a complete bundle record"),
        ({"candidates": {**record["candidates"], "ensembles": [[0, 2], [2]]}}, "not a complete bundle record"),
        ({"candidates": {**record["candidates"], "ensemble": False}}, "its candidates' settings disagree"),
        ({"version": 4}, "format version 4 and its candidates' settings disagree"),
    ):
        (directory / "bundle.json").write_text(json.dumps({**record, **change}))
        with pytest.raises(BundleError, match=message):
            read_bundle(str(directory), verify=False)
    own["weights"].write_text(own["weights"].read_text() + "FromNet2= 1\n")
    code, err = run_cli(bundle_args(own, tmp_path / "other", *three[-6:], "--ensemble"), monkeypatch, capsys)
    assert code == EXIT_USAGE and "the weights name FromNet2: tuned on a list per candidate network, not on the " in err
    assert "leave out --ensemble" in one_line(err) and not (tmp_path / "other").exists()


def test_lowercase_without_tokenize_is_refused(made: dict[str, Path], monkeypatch, capsys) -> None:
    args = ["translate-hybrid", str(made["bundle"]), str(made["in"]), str(made["out"]), "--lowercase"]
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == EXIT_USAGE and "--lowercase without --tokenize" in one_line(err), err


def test_an_empty_directory_becomes_the_bundle(system, tmp_path: Path, monkeypatch, capsys) -> None:
    directory = tmp_path / "hybrid"
    directory.mkdir()
    code, err = run_cli(bundle_args(system, directory), monkeypatch, capsys)
    assert code == 0, err
    assert sorted(os.listdir(directory)) == ["bundle.json", "moses.ini", "rerank.weights"]
    assert os.listdir(tmp_path) == ["hybrid"]  # no temporary left beside it
    assert (directory / "rerank.weights").read_bytes() == system["weights"].read_bytes()


def test_a_changed_network_is_refused(made: dict[str, Path], monkeypatch, capsys) -> None:
    with open(made["cslm"], "r+b") as f:  # the same size, one byte changed
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 1]))
    code, err = translate(made, monkeypatch, capsys)
    assert code == EXIT_USAGE, err
    assert one_line(err).endswith(
        f"{made['cslm']}: changed since the bundle was written (its content (SHA-256) differs from "
        f"{made['bundle'] / 'bundle.json'}): restore it, or write the bundle again (phrase-rescorer bundle)"
    )
    assert not made["out"].exists()


def test_a_changed_copy_is_refused(made: dict[str, Path], monkeypatch, capsys) -> None:
    copy = made["bundle"] / "rerank.weights"
    copy.write_text(copy.read_text().replace("CSLM0= 0.1", "CSLM0= 0.9"))
    code, err = translate(made, monkeypatch, capsys)
    assert code == EXIT_USAGE and f"{copy}: changed since the bundle was written" in one_line(err), err


def test_a_changed_ini_file_is_refused(made: dict[str, Path], monkeypatch, capsys) -> None:
    """A file the ini names: its size and modification time are compared first."""
    made["table"].write_bytes(made["table"].read_bytes() + b"x")
    code, err = translate(made, monkeypatch, capsys)
    assert code == EXIT_USAGE, err
    assert f"{made['table']}: changed since the bundle was written (its size differs" in one_line(err)


def retime(path: Path) -> None:
    """``path`` given another modification time, its bytes kept (a copy that did not keep the times)."""
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 10**9))


def test_an_ini_file_with_a_new_modification_time_and_its_content_goes_on(
    made: dict[str, Path], monkeypatch, capsys
) -> None:
    """The same bytes under a new modification time: hashed, found unchanged, told, not refused;
    translate-hybrid goes on to the decoder (the stand-in's own failure)."""
    retime(made["table"])
    notes: list[str] = []
    assert read_bundle(str(made["bundle"]), on_note=notes.append).ini == str(made["bundle"] / "moses.ini")
    assert notes == [
        f"{made['table']}: modification time changed since the bundle was written, content unchanged "
        "(SHA-256): continued"
    ]
    code, err = translate(made, monkeypatch, capsys)
    assert code != EXIT_USAGE and "changed since the bundle was written (its" not in err, err
    assert f"{made['table']}: modification time changed since the bundle was written" in err
    assert "stand-in decoder: no decoding" in err


def test_a_bundle_recorded_without_the_hash_compares_size_and_time(made: dict[str, Path], monkeypatch, capsys) -> None:
    """A bundle written before the ini's files were hashed: a new modification time is a change."""
    record = made["bundle"] / "bundle.json"
    found = json.loads(record.read_text())
    for entry in found["ini_files"]:
        del entry["sha256"]
    record.write_text(json.dumps(found, indent=1) + "\n")
    retime(made["table"])
    code, err = translate(made, monkeypatch, capsys)
    assert code == EXIT_USAGE, err
    assert f"{made['table']}: changed since the bundle was written (its size or modification time" in one_line(err)


def test_a_missing_file_is_refused(made: dict[str, Path], monkeypatch, capsys) -> None:
    made["cslm"].unlink()
    code, err = translate(made, monkeypatch, capsys)
    assert code == EXIT_USAGE, err
    assert one_line(err).endswith(
        f"{made['cslm']}: no such file or directory (recorded in {made['bundle']}/bundle.json)"
    )
    assert not made["out"].exists()


def test_an_unreadable_file_is_refused_as_the_host_s_error(made: dict[str, Path], monkeypatch, capsys) -> None:
    from phrase_rescorer import checksums

    hash_file = checksums.sha256_of

    def unreadable(path: str) -> str:  # as for a file of no read permission (the tests may run as root)
        if path == str(made["cslm"]):
            raise HostError(f"{path}: cannot read (Permission denied)")
        return hash_file(path)

    monkeypatch.setattr(checksums, "sha256_of", unreadable)
    code, err = translate(made, monkeypatch, capsys)
    assert code == EXIT_OS, err
    assert one_line(err).endswith(f"{made['cslm']}: cannot read (Permission denied)")
    assert not made["out"].exists()


def test_not_a_bundle(tmp_path: Path, monkeypatch, capsys) -> None:
    (tmp_path / "in.txt").write_text("a\n")
    code, err = run_cli(["translate-hybrid", str(tmp_path), str(tmp_path / "in.txt"), "-"], monkeypatch, capsys)
    assert code == EXIT_USAGE and f"{tmp_path}: no bundle.json: not a bundle" in one_line(err), err


def test_interrupted_translation_leaves_no_output_and_no_decoder(made: dict[str, Path], tmp_path: Path) -> None:
    """SIGINT while the decoder runs: exit 130, no OUT and no temporary, the decoder gone."""
    pid_file, wait = made["moses"].parent / "decoder.pid", made["moses"].parent / "decoder.wait"
    pid_file.unlink(missing_ok=True)
    wait.touch()  # the stand-in decoder waits to be stopped
    args = ["translate-hybrid", str(made["bundle"]), str(made["in"]), str(made["out"]), "--moses", str(made["moses"])]
    process = subprocess.Popen(
        [PYTHON, "-m", "phrase_rescorer", *args],
        stderr=subprocess.PIPE,
        env=subprocess_env(),
        preexec_fn=sigint_as_at_a_terminal,
    )
    try:
        deadline = time.monotonic() + 600
        while not (pid_file.exists() and pid_file.read_text().strip()) and process.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        decoder = int(pid_file.read_text())
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=600)
    finally:
        wait.unlink()
        if process.poll() is None:
            process.kill()
    assert process.returncode == EXIT_SIGINT, err
    assert not made["out"].exists() and not list(tmp_path.glob(".out.txt*"))
    for _ in range(100):  # reaped by the program (killed, waited for): no such process
        try:
            os.kill(decoder, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(decoder, signal.SIGKILL)
        pytest.fail("the decoder outlived the interrupted translation")


def writing_moses(directory: Path, drop_last: bool = False) -> Path:
    """A stand-in Moses that decodes: each input line's n-best list is the line itself, one
    hypothesis (Distortion0 'x', not a number, for the line ``bad``); ``drop_last``: the chunk's
    last line left out of the list."""
    moses = directory / "writing-moses"
    (moses / "bin").mkdir(parents=True)
    decoder = moses / "bin" / "moses"
    show = SHOW_WEIGHTS.replace("\n", "\\n")
    decoder.write_text(
        "#!/bin/sh\n"
        f'case " $* " in *" -show-weights "*) printf \'{show}\'; exit 0;; esac\n'
        "while [ $# -gt 0 ]; do\n"
        '  case "$1" in -input-file) input=$2; shift;; -n-best-list) nbest=$2; shift;; esac\n'
        "  shift\n"
        "done\n"
        f'last=$(($(wc -l < "$input") + {0 if drop_last else 1})); i=0\n'
        "while IFS= read -r line; do\n"
        '  if [ "$line" = bad ]; then d=x; else d=0; fi\n'
        '  if [ $((i + 1)) -lt "$last" ]; then\n'
        '    echo "$i ||| $line ||| Distortion0= $d LM0= -1 WordPenalty0= -2 TranslationModel0= -1 -1 ||| -3"\n'
        "  fi\n"
        "  i=$((i + 1))\n"
        'done < "$input" > "$nbest"\n'
    )
    decoder.chmod(0o755)
    return moses


def test_a_malformed_decoder_list_names_the_input_line(
    made: dict[str, Path], tmp_path: Path, monkeypatch, capsys
) -> None:
    """A decoder whose n-best list has a malformed line for the input line ``bad``: the refusal
    names IN and that line (the second of the second chunk), not the chunk's deleted list."""
    moses = writing_moses(tmp_path)
    made["in"].write_text("a b\nb a\na a\nbad\nb b\n")
    args = ["translate-hybrid", str(made["bundle"]), str(made["in"]), str(made["out"]), "--moses", str(moses),
            "--chunk-lines", "2"]  # fmt: skip
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == EXIT_INPUT, err
    line = one_line(err)
    assert f"{made['in']}:4: the decoder's n-best list of this line: feature value 'x' is not a number" in line, err
    assert "translate-hybrid-" not in line  # no temporary file
    assert not made["out"].exists()


@pytest.mark.parametrize("which", ["bundle.json", "ini table"])
def test_out_as_a_file_of_the_bundle_is_refused(
    made: dict[str, Path], tmp_path: Path, monkeypatch, capsys, which: str
) -> None:
    """OUT naming the bundle's record or a table the ini names, with a decoder that decodes (or a
    translation would be written over it): exit 6, the file unchanged."""
    target = made["bundle"] / "bundle.json" if which == "bundle.json" else made["table"]
    before = target.read_bytes()
    moses = writing_moses(tmp_path)
    args = ["translate-hybrid", str(made["bundle"]), str(made["in"]), str(target), "--moses", str(moses)]
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == EXIT_OS, err
    assert f"{target}: output is the same file as the " in one_line(err)
    assert target.read_bytes() == before


@pytest.mark.parametrize("networks", [False, True], ids=["no-network", "cslm"])
def test_a_decoder_list_lacking_a_sentence_is_refused(
    made: dict[str, Path], system: dict[str, Path], tmp_path: Path, monkeypatch, capsys, networks: bool
) -> None:
    """A decoder that leaves each chunk's last line out of its list: exit 6 naming IN and the
    chunk's lines, nothing written (not shifted translations), with or without a network."""
    bundle = made["bundle"]
    if not networks:  # nothing else counts the list's sentences
        weights = tmp_path / "plain.weights"
        weights.write_text(WEIGHTS.replace("CSLM0= 0.1\n", ""))
        bundle = tmp_path / "plain"
        args = ["bundle", str(bundle), "--ini", str(made["ini"]), "--weights", str(weights),
                "--moses", str(made["moses"])]  # fmt: skip
        code, err = run_cli(args, monkeypatch, capsys)
        assert code == 0, err
    made["in"].write_text("a b\nb a\na a\nb b\n")
    moses = writing_moses(tmp_path, drop_last=True)
    args = ["translate-hybrid", str(bundle), str(made["in"]), str(made["out"]), "--moses", str(moses),
            "--chunk-lines", "2"]  # fmt: skip
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == EXIT_OS, err
    assert one_line(err).endswith(
        f"{made['in']} lines 1-2: the decoder's n-best list has 1 sentence(s) for the chunk's 2 lines: the decoder's "
        "output is incomplete; no line of the chunk is written"
    )
    assert not made["out"].exists()


@pytest.mark.parametrize(("content", "message"), [(b"a \xff\n", "invalid UTF-8 at byte 2"), (b"a b a\n", "3 tokens")])
def test_a_bad_line_of_a_later_chunk_is_refused_before_decoding(
    made: dict[str, Path], monkeypatch, capsys, content: bytes, message: str
) -> None:
    """Invalid UTF-8 or a line over --max-tokens in the second chunk: refused (exit 3, naming
    the line) before the first chunk is decoded (the stand-in decoder records each run)."""
    pid_file = made["moses"].parent / "decoder.pid"
    pid_file.unlink(missing_ok=True)
    made["in"].write_bytes(b"a b\nb a\n" + content)
    args = ["translate-hybrid", str(made["bundle"]), str(made["in"]), str(made["out"]), "--moses", str(made["moses"]),
            "--chunk-lines", "2", "--max-tokens", "2"]  # fmt: skip
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == EXIT_INPUT, err
    assert f"{made['in']}:3: {message}" in one_line(err)
    assert not pid_file.exists()  # no chunk decoded
    assert not made["out"].exists()


def test_a_missing_input_is_refused_before_the_bundle_is_read(made: dict[str, Path], monkeypatch, capsys) -> None:
    """A missing IN is refused first (exit 6), not after the bundle's files were checked (here one
    of them is missing too)."""
    made["in"].unlink()
    made["cslm"].unlink()
    code, err = translate(made, monkeypatch, capsys)
    assert code == EXIT_OS, err
    assert one_line(err).endswith(f"{made['in']}: cannot read: No such file or directory")


@pytest.fixture(scope="module")
def nan_networks(system: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("nan")
    return {kind: nan_copy(system[kind], d / f"{kind}.nan.pt") for kind in ("cslm", "nmt")}


@pytest.mark.parametrize("role", ["candidates", "feature"])
def test_a_nan_network_names_the_input_line(
    made: dict[str, Path], nan_networks: dict[str, Path], tmp_path: Path, monkeypatch, capsys, role: str
) -> None:
    """A network whose weights give NaN names the line of IN, not the line within its chunk nor a
    chunk's temporary list: a candidate network at line 3 (the first chunk's lines are empty,
    which the network does not read), a feature network at line 1 (every line's NaN)."""
    bundle = tmp_path / "nan-bundle"
    if role == "candidates":
        weights = tmp_path / "candidates.weights"
        weights.write_text(WEIGHTS + "FromMoses= 1\nFromNet0= 1\n")
        args = bundle_args({**made, "weights": weights}, bundle, "--candidates", str(nan_networks["nmt"]))
        made["in"].write_text("\n\na b\n")
        network, line = nan_networks["nmt"], 3
    else:
        args = bundle_args({**made, "cslm": nan_networks["cslm"]}, bundle)
        made["in"].write_text("a b\n")
        network, line = nan_networks["cslm"], 1
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 0, err
    args = ["translate-hybrid", str(bundle), str(made["in"]), str(made["out"]), "--moses", str(writing_moses(tmp_path)),
            "--chunk-lines", "2"]  # fmt: skip
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == EXIT_MODEL, err
    assert one_line(err).endswith(
        f"{network}: the network gave log p = nan for {made['in']}:{line}; its weights are unusable "
        "(diverged training?)"
    )
    assert not made["out"].exists()


def test_sentences_searched_together_are_recorded_as_version_6(system, tmp_path: Path, monkeypatch, capsys) -> None:
    """--batch-sentences N: recorded (N above 1 only), in format version 6 (an earlier reader would
    search one sentence at a time, its products rounding otherwise), and read back; refused without
    --candidates (exit 2); a record that disagrees (an earlier version, N no whole number from 1) is
    refused."""
    own = candidate_system(system, tmp_path)
    directory = tmp_path / "hybrid"
    code, err = run_cli([*bundle_args(own, directory), "--batch-sentences", "4"], monkeypatch, capsys)
    assert code == EXIT_USAGE and "--batch-sentences without --candidates" in one_line(err), err
    assert not directory.exists()
    args = bundle_args(own, directory, "--candidates", str(system["nmt"]), "--batch-sentences", "4")
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 0, err
    record = json.loads((directory / "bundle.json").read_text())
    assert record["version"] == 6 and record["candidates"]["batch"] == 4
    assert read_bundle(str(directory)).candidates.batch == 4  # type: ignore[union-attr]
    for change, message in (
        ({"version": 5}, "format version 5 and its candidates' settings disagree"),
        ({"candidates": {**record["candidates"], "batch": 0}}, "batch is 0, not a whole number of sentences"),
        ({"candidates": {**record["candidates"], "batch": True}}, "batch is True, not a whole number of sentences"),
    ):
        (directory / "bundle.json").write_text(json.dumps({**record, **change}))
        with pytest.raises(BundleError, match=message):
            read_bundle(str(directory), verify=False)
    one = {**record, "version": 1, "candidates": {k: v for k, v in record["candidates"].items() if k != "batch"}}
    (directory / "bundle.json").write_text(json.dumps(one))
    assert read_bundle(str(directory), verify=False).candidates.batch == 1  # type: ignore[union-attr]
