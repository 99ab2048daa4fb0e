"""``rerank`` and ``rerank-tune`` refusing what would lose a file or give a wrong result: an output
naming an input (directly, through a symlink or a hard link, or inside ``--work-dir``), weights
that do not weigh exactly the list's features, values that are not finite numbers, sentence IDs
that do not count the sentences, a reference of another length or not UTF-8. Each refusal is one
line with the documented exit code, before any work: the inputs keep every byte, nothing is
written. ``rerank-tune`` runs stand-in Moses programs that fail if they are ever started."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers.cli_run import left_behind, run_cli

# Lines as bin/moses writes them: three sentences, the second with an empty hypothesis.
NBEST = (
    "0 ||| un homme .  ||| LM0= -10.5 WordPenalty0= -3 TranslationModel0= -1 -2.5 CSLM0= -9 ||| -3.7\n"
    "0 ||| un chien .  ||| LM0= -12 WordPenalty0= -3 TranslationModel0= -1.5 -2 CSLM0= -4 ||| -3.9\n"
    "1 |||  ||| LM0= -2.3 WordPenalty0= 0 TranslationModel0= 0 0 CSLM0= -1 ||| -0.5\n"
    "2 ||| une femme  ||| LM0= -8 sp_x= 1 WordPenalty0= -2 TranslationModel0= -1 -1 CSLM0= -2 ||| -2\n"
)
WEIGHTS = "[weight]\nLM0= 0.5\nWordPenalty0= -1\nTranslationModel0= 0.2 0.2\nCSLM0= 0.3\n"
REF = "un homme .\n\nune femme\n"


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    paths = {"nbest": tmp_path / "dev.nbest", "weights": tmp_path / "rerank.weights", "ref": tmp_path / "dev.fr"}
    paths["nbest"].write_text(NBEST)
    paths["weights"].write_text(WEIGHTS)
    paths["ref"].write_text(REF)
    paths["ini"] = tmp_path / "moses.ini"
    paths["ini"].write_text("[feature]\nKENLM name=LM0\n\n[weight]\nLM0= 0.5\nWordPenalty0= -1\n")
    return paths


@pytest.fixture
def failing_moses(tmp_path: Path) -> Path:
    """bin/extractor and bin/mert that fail loudly: a test passing with them refused before."""
    root = tmp_path / "moses"
    for name in ("extractor", "mert", "moses"):
        path = root / "bin" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\necho started >&2\nexit 1\n")
        path.chmod(0o755)
    return root


def _snapshot(paths: dict[str, Path]) -> dict[str, bytes]:
    return {k: p.read_bytes() for k, p in paths.items()}


def _tune(inputs: dict[str, Path], moses: Path, *extra: str, nbest: Path | None = None, ref: Path | None = None):
    out = [str(nbest or inputs["nbest"]), str(ref or inputs["ref"])]
    return ["rerank-tune", *out, *extra, "--moses", str(moses), "--restarts", "1"]


def _link(kind: str, target: Path, at: Path) -> Path:
    if kind == "symlink":
        at.symlink_to(target)
    elif kind == "hardlink":
        os.link(target, at)
    else:
        return target
    return at


@pytest.mark.parametrize("kind", ["direct", "symlink", "hardlink"])
@pytest.mark.parametrize("victim", ["nbest", "weights"])
def test_rerank_out_naming_an_input_is_refused(
    inputs: dict[str, Path], tmp_path: Path, kind: str, victim: str, monkeypatch, capsys
) -> None:
    before = _snapshot(inputs)
    out = _link(kind, inputs[victim], tmp_path / "out.txt")
    code, err = run_cli(["rerank", str(inputs["nbest"]), str(inputs["weights"]), str(out)], monkeypatch, capsys)
    assert code == 6, err
    what = {"nbest": "n-best list", "weights": "weights"}[victim]
    assert f"output is the same file as the {what} '{inputs[victim]}'" in err
    assert len(err.strip().splitlines()) == 1
    assert _snapshot(inputs) == before and not left_behind(tmp_path)


@pytest.mark.parametrize("kind", ["direct", "symlink", "hardlink"])
@pytest.mark.parametrize("victim", ["nbest", "ref", "ini"])
def test_rerank_tune_weights_naming_an_input_is_refused(
    inputs: dict[str, Path], failing_moses: Path, tmp_path: Path, kind: str, victim: str, monkeypatch, capsys
) -> None:
    before = _snapshot(inputs)
    out = _link(kind, inputs[victim], tmp_path / "tuned.weights")
    args = _tune(inputs, failing_moses, str(out), "--init", str(inputs["ini"]))
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 6, err
    assert f"output is the same file as the {'' if victim != 'nbest' else 'n-best list'}" in err
    assert str(inputs[victim]) in err and "started" not in err
    assert _snapshot(inputs) == before and not left_behind(tmp_path)


@pytest.mark.parametrize("name", ["nbest.txt", "scores.dat", "features.dat", "init.opt", "mert.log"])
def test_rerank_tune_never_writes_over_an_input_in_its_work_dir(
    inputs: dict[str, Path], failing_moses: Path, tmp_path: Path, name: str, monkeypatch, capsys
) -> None:
    """A kept work dir holds the list's plain copy as nbest.txt: given back as the list, or any
    input under the name of a file extractor and mert write, it is refused, not truncated."""
    work = tmp_path / "work"
    work.mkdir()
    victim = work / name
    victim.write_bytes(inputs["nbest"].read_bytes() if name == "nbest.txt" else inputs["ref"].read_bytes())
    if name == "nbest.txt":
        args = _tune(inputs, failing_moses, str(tmp_path / "w"), "--work-dir", str(work), nbest=victim)
    else:
        args = _tune(inputs, failing_moses, str(tmp_path / "w"), "--work-dir", str(work), ref=victim)
    before = victim.read_bytes()
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 6, err
    assert f"rerank-tune writes {name} in --work-dir" in err and "started" not in err
    assert victim.read_bytes() == before
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("lines", [1, 2, 4, 1014])
def test_rerank_tune_refuses_a_reference_of_another_length_before_tuning(
    inputs: dict[str, Path], failing_moses: Path, tmp_path: Path, lines: int, monkeypatch, capsys
) -> None:
    ref = tmp_path / "other.fr"
    ref.write_text("".join(f"ligne {i}\n" for i in range(lines)))
    code, err = run_cli(_tune(inputs, failing_moses, str(tmp_path / "w"), ref=ref), monkeypatch, capsys)
    assert code == 3, err
    assert f"{ref}: {lines:,} lines, but {inputs['nbest']} lists 3 sentences" in err and "started" not in err
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize(
    ("data", "where"),
    [(b"un homme .\n\xff\xfe\nune femme\n", ":2: invalid UTF-8"), (b"\x1f\x8b\x08\x00garbage", "gzip")],
)
def test_rerank_tune_reads_the_reference_like_every_input(
    inputs: dict[str, Path], failing_moses: Path, tmp_path: Path, data: bytes, where: str, monkeypatch, capsys
) -> None:
    ref = tmp_path / "bad.fr"
    ref.write_bytes(data)
    code, err = run_cli(_tune(inputs, failing_moses, str(tmp_path / "w"), ref=ref), monkeypatch, capsys)
    assert code == 3, err
    assert str(ref) in err and where in err and "Traceback" not in err and "started" not in err


def test_rerank_tune_reads_a_gzip_crlf_reference_by_content(
    inputs: dict[str, Path], failing_moses: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    """Read, counted and handed on: the run gets as far as the (failing) extractor."""
    ref = tmp_path / "ref.txt"  # no .gz in the name: told by content
    ref.write_bytes(gzip.compress(REF.replace("\n", "\r\n").encode()))
    work = tmp_path / "work"
    code, err = run_cli(
        _tune(inputs, failing_moses, str(tmp_path / "w"), "--work-dir", str(work), ref=ref), monkeypatch, capsys
    )
    assert code == 6 and "extractor failed" in err, err
    assert (work / "reference.0.txt").read_bytes() == REF.encode()  # what extractor reads: plain, LF


@pytest.mark.parametrize(
    ("old", "new", "line", "why"),
    [
        ("CSLM0= -4", "CSLM0= nan", 2, "'nan' is not a finite number"),
        ("CSLM0= -1", "CSLM0= inf", 3, "'inf' is not a finite number"),
        ("CSLM0= -2", "CSLM0= x", 4, "'x' is not a number"),
        ("CSLM0= -2", "CSLM0= -2 CSLM0= -2", 4, "feature CSLM0 twice"),
        ("sp_x= 1", "sp_x=1", 4, "Moses writes a feature as 'name= value'"),
        ("1 |||  |||", "7 |||  |||", 3, "sentence ID 7 after 0"),
        ("1 |||  |||", "20000000 |||  |||", 3, "sentence ID 20000000 after 0"),
    ],
)
@pytest.mark.parametrize("command", ["rerank", "rerank-tune"])
def test_a_bad_line_anywhere_is_refused_with_file_and_line(
    inputs: dict[str, Path],
    failing_moses: Path,
    tmp_path: Path,
    command: str,
    old: str,
    new: str,
    line: int,
    why: str,
    monkeypatch,
    capsys,
) -> None:
    bad = tmp_path / "bad.nbest"
    text = NBEST.splitlines(keepends=True)
    text[line - 1] = text[line - 1].replace(old, new)
    assert text[line - 1] != NBEST.splitlines(keepends=True)[line - 1]
    bad.write_text("".join(text))
    out = tmp_path / "out"
    if command == "rerank":
        args = ["rerank", str(bad), str(inputs["weights"]), str(out)]
    else:
        args = _tune(inputs, failing_moses, str(out), nbest=bad)
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 3, err
    assert f"{bad}:{line}: " in err and why in err and "started" not in err
    assert not out.exists() and not left_behind(tmp_path)


def test_rerank_weights_must_weigh_exactly_the_lists_features(
    inputs: dict[str, Path], tmp_path: Path, monkeypatch, capsys
) -> None:
    out = tmp_path / "out"
    extra = tmp_path / "extra.weights"  # tuned with CSLM0 and NMT0, applied to a list with CSLM0 only
    extra.write_text(WEIGHTS + "NMT0= 0.4\n")
    code, err = run_cli(["rerank", str(inputs["nbest"]), str(extra), str(out)], monkeypatch, capsys)
    assert code == 2 and "weights for the feature NMT0, which the n-best list lacks" in err, err
    missing = tmp_path / "missing.weights"
    missing.write_text(WEIGHTS.replace("CSLM0= 0.3\n", ""))
    code, err = run_cli(["rerank", str(inputs["nbest"]), str(missing), str(out)], monkeypatch, capsys)
    assert code == 2 and "no weights for the feature CSLM0 of the n-best list" in err, err
    assert not out.exists()
    # a moses.ini also weighs features the decoder does not write into lists: those are left out
    ini = tmp_path / "tuned.ini"
    ini.write_text("[feature]\nUnknownWordPenalty\n\n" + WEIGHTS + "UnknownWordPenalty0= 1\n")
    code, err = run_cli(["rerank", str(inputs["nbest"]), str(ini), str(out)], monkeypatch, capsys)
    assert code == 0, err
    assert out.read_text() == "un chien .\n\nune femme\n"


@pytest.mark.parametrize("header", ["", "# tuned\n[weight]\n"])
def test_a_feature_weighed_twice_is_refused(inputs: dict[str, Path], tmp_path: Path, header: str, monkeypatch, capsys):
    twice = tmp_path / "twice.weights"
    twice.write_text(header + WEIGHTS.removeprefix("[weight]\n") + "CSLM0= -5\n")
    code, err = run_cli(["rerank", str(inputs["nbest"]), str(twice), str(tmp_path / "o")], monkeypatch, capsys)
    first = 4 + header.count("\n")
    assert code == 2 and f"CSLM0 has weight lines twice (lines {first} and {first + 1})" in err, err


def test_rerank_reads_gzip_weights_and_checks_the_sentence_count(
    inputs: dict[str, Path], tmp_path: Path, monkeypatch, capsys
) -> None:
    weights = tmp_path / "w.gz"
    weights.write_bytes(gzip.compress(WEIGHTS.encode()))
    out = tmp_path / "out"
    code, err = run_cli(["rerank", str(inputs["nbest"]), str(weights), str(out)], monkeypatch, capsys)
    assert code == 0, err
    assert out.read_text() == "un chien .\n\nune femme\n"
    code, err = run_cli(
        ["rerank", str(inputs["nbest"]), str(weights), str(tmp_path / "o2"), "--sentences", "20000000"],
        monkeypatch,
        capsys,
    )
    assert code == 3 and "lists 3 sentences (IDs 0 to 2), --sentences says 20,000,000" in err, err
    assert not (tmp_path / "o2").exists()


def test_weights_files_are_written_compressed_as_named(tmp_path: Path) -> None:
    import numpy as np

    from phrase_rescorer.reranking.weights import read_weights_file, write_weights_file

    layout = (("LM0", 1), ("TM0", 2))
    write_weights_file(str(tmp_path / "w.gz"), layout, np.array([0.5, 0.25, -1.0]))
    text = gzip.decompress((tmp_path / "w.gz").read_bytes()).decode()
    assert text == "[weight]\nLM0= 0.5\nTM0= 0.25 -1\n"
    assert read_weights_file(str(tmp_path / "w.gz")).by_name == {"LM0": [0.5], "TM0": [0.25, -1.0]}


@pytest.mark.parametrize(
    ("victim", "kind"),
    [(v, k) for v in ("nbest", "ref", "ini") for k in ("direct", "symlink", "hardlink")] + [("weights-out", "direct")],
)
def test_rerank_tune_held_out_naming_an_input_or_the_weights_is_refused(
    inputs: dict[str, Path], failing_moses: Path, tmp_path: Path, kind: str, victim: str, monkeypatch, capsys
) -> None:
    before = _snapshot(inputs)
    weights = tmp_path / "tuned.weights"
    if victim == "weights-out":  # not written yet: only its own spelling can name it
        held, refusal = weights, f"output goes to the same place as the weights '{weights}'"
    else:
        held = _link(kind, inputs[victim], tmp_path / "held.fr")
        what = {"nbest": "n-best list", "ref": "reference", "ini": "start weights (--init)"}[victim]
        refusal = f"output is the same file as the {what} '{inputs[victim]}'"
    args = _tune(inputs, failing_moses, str(weights), "--init", str(inputs["ini"]), "--held-out", str(held))
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 6, err
    assert refusal in err
    assert len(err.strip().splitlines()) == 1 and "started" not in err
    assert _snapshot(inputs) == before and not weights.exists() and not left_behind(tmp_path)


def test_rerank_tune_held_out_of_one_sentence_is_refused_before_tuning(
    inputs: dict[str, Path], failing_moses: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    """Two folds need two sentences: a one-sentence list is refused before Moses starts."""
    nbest, ref = tmp_path / "one.nbest", tmp_path / "one.fr"
    nbest.write_text(NBEST.splitlines(keepends=True)[0])
    ref.write_text("un homme .\n")
    held = tmp_path / "held.fr"
    args = _tune(inputs, failing_moses, str(tmp_path / "w"), "--held-out", str(held), nbest=nbest, ref=ref)
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 3, err
    assert f"{nbest} lists 1 sentence(s): --held-out needs at least 2" in err and "started" not in err
    assert not (tmp_path / "w").exists() and not held.exists()


@pytest.mark.parametrize("name", ["heldout/fold0.nbest", "heldout/tune1/reference.0.txt"])
def test_rerank_tune_never_writes_over_an_input_in_its_held_out_work_dir(
    inputs: dict[str, Path], failing_moses: Path, tmp_path: Path, name: str, monkeypatch, capsys
) -> None:
    """With --held-out the folds' lists and tunings are written in --work-dir/heldout: an input
    there is refused; without --held-out nothing is written there, and it is no concern."""
    victim = tmp_path / "work" / name
    victim.parent.mkdir(parents=True)
    victim.write_bytes(inputs["ref"].read_bytes())
    args = _tune(inputs, failing_moses, str(tmp_path / "w"), "--work-dir", str(tmp_path / "work"), ref=victim)
    code, err = run_cli([*args, "--held-out", str(tmp_path / "held.fr")], monkeypatch, capsys)
    assert code == 6, err
    assert f"rerank-tune writes {name} in --work-dir" in err and "started" not in err
    assert victim.read_bytes() == inputs["ref"].read_bytes() and not (tmp_path / "held.fr").exists()
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 6 and "started" in err  # the stand-in extractor ran: no refusal


@pytest.mark.parametrize("name", ["choice1/nbest.txt", "choice1/heldout/fold0.nbest", "heldout/tune0/reference.0.txt"])
def test_rerank_tune_never_writes_over_an_input_where_it_tries_a_feature_set(
    inputs: dict[str, Path], failing_moses: Path, tmp_path: Path, name: str, monkeypatch, capsys
) -> None:
    """With --choose-leave-out each set tried has its list and folds in --work-dir/choice<k> (the
    first set's folds in heldout/, without --held-out too): an input there is refused."""
    victim = tmp_path / "work" / name
    victim.parent.mkdir(parents=True)
    victim.write_bytes(inputs["ref"].read_bytes())
    args = _tune(inputs, failing_moses, str(tmp_path / "w"), "--work-dir", str(tmp_path / "work"), ref=victim)
    code, err = run_cli([*args, "--choose-leave-out", "LM0"], monkeypatch, capsys)
    assert code == 6, err
    assert f"rerank-tune writes {name} in --work-dir" in err and "started" not in err
    assert victim.read_bytes() == inputs["ref"].read_bytes() and not (tmp_path / "w").exists()


@pytest.mark.parametrize("name", ["heldout", "heldout/tune0"])
def test_rerank_tune_refuses_a_file_where_its_held_out_directory_goes(
    inputs: dict[str, Path], failing_moses: Path, tmp_path: Path, name: str, monkeypatch, capsys
) -> None:
    blocker = tmp_path / "work" / name
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("kept\n")
    args = _tune(inputs, failing_moses, str(tmp_path / "w"), "--work-dir", str(tmp_path / "work"))
    code, err = run_cli([*args, "--held-out", str(tmp_path / "held.fr")], monkeypatch, capsys)
    assert code == 6, err
    assert f"{blocker}: not a directory (rerank-tune writes {name}/ in --work-dir)" in err and "started" not in err
    assert blocker.read_text() == "kept\n" and not (tmp_path / "w").exists()


def test_rerank_tune_held_out_failing_keeps_the_weights_and_says_so(
    inputs: dict[str, Path], failing_moses: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    """The full tuning succeeds, a half's tuning fails: WEIGHTS (written first) stays, FILE is not
    written, the one line says which tuning failed, and the temporary directory its log is in is
    kept."""
    import numpy as np

    from phrase_rescorer.reranking import heldout, mert

    def full(toolkit, nbest, references, start, work_dir, **kwargs):  # type: ignore[no-untyped-def]
        return mert.TuneResult(np.asarray(start) + 0.5, 0.0)

    def half(toolkit, nbest, references, start, work_dir, **kwargs):  # type: ignore[no-untyped-def]
        raise mert.RerankError(f"mert failed (exit 1); see {os.path.join(work_dir, 'mert.log')}:\nboom")

    monkeypatch.setattr(mert, "tune", full)
    monkeypatch.setattr(heldout, "tune", half)
    weights, held = tmp_path / "tuned.weights", tmp_path / "held.fr"
    args = _tune(inputs, failing_moses, str(weights), "--init", str(inputs["ini"]), "--held-out", str(held))
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 6, err
    assert f"--held-out: a half's tuning failed ({weights} is written): mert failed (exit 1); see " in err
    work = Path(err.split("; see ")[1].split(":")[0]).parents[2]  # WORK/heldout/tune0/mert.log
    assert work.name.startswith("rerank-") and (work / "nbest.txt").is_file()
    shutil.rmtree(work)
    assert "CSLM0= " in weights.read_text() and not held.exists() and not left_behind(tmp_path)


@pytest.mark.parametrize("command", ["rerank", "rerank-tune"])
@pytest.mark.parametrize("given", [["--mbr-size", "10"], ["--mbr-scale", "2"]])
def test_mbr_settings_without_mbr_are_refused_before_any_work(
    inputs: dict[str, Path], failing_moses: Path, tmp_path: Path, command: str, given: list[str], monkeypatch, capsys
) -> None:
    before = _snapshot(inputs)
    out = tmp_path / "out"
    if command == "rerank":
        argv = ["rerank", str(inputs["nbest"]), str(inputs["weights"]), str(out), *given]
    else:
        argv = _tune(inputs, failing_moses, str(out), *given)
    code, err = run_cli(argv, monkeypatch, capsys)
    assert code == 2, err
    assert f"{given[0]} without --mbr" in err and "started" not in err
    assert not out.exists() and _snapshot(inputs) == before


@pytest.mark.parametrize(
    "setting", [["--mbr-size", "0"], ["--mbr-scale", "-1"], ["--mbr-scale", "nan"], ["--mbr-scale", "inf"]]
)
def test_bad_mbr_settings_are_refused(inputs: dict[str, Path], tmp_path: Path, setting: list[str], monkeypatch, capsys):
    out = tmp_path / "out"
    code, err = run_cli(
        ["rerank", str(inputs["nbest"]), str(inputs["weights"]), str(out), "--mbr", *setting], monkeypatch, capsys
    )
    assert code == 2, err
    assert setting[0] in err and not out.exists()


def test_rerank_mbr_chooses_otherwise_than_the_highest_sum(tmp_path: Path, monkeypatch, capsys) -> None:
    # "a b c d" and "a b c" have the highest sum; "a b c" agrees more with the other two
    nbest = tmp_path / "list.nbest"
    nbest.write_text("0 ||| a b c d ||| F0= 2 ||| 2\n0 ||| a b c ||| F0= 2 ||| 2\n0 ||| x ||| F0= 1 ||| 1\n")
    weights = tmp_path / "w"
    weights.write_text("[weight]\nF0= 1\n")
    outs = {}
    for rule in ([], ["--mbr"]):
        out = tmp_path / f"out{len(rule)}"
        code, err = run_cli(["rerank", str(nbest), str(weights), str(out), *rule], monkeypatch, capsys)
        assert code == 0, err
        outs[bool(rule)] = out.read_text()
    assert outs == {False: "a b c d\n", True: "a b c\n"}
    assert "MBR of 200 at scale 1" in err


@pytest.mark.parametrize(
    ("weights", "list_line", "code", "said"),
    [
        # a weight: 1e308 x -9 is beyond the range
        (WEIGHTS.replace("CSLM0= 0.3", "CSLM0= 1e308"), None, 2, "the weight 1e+308 of CSLM0 times its value -9"),
        # two weights whose products are in range, their sum not
        (WEIGHTS.replace("0.2 0.2", "-1e308 -1e308"), None, 2, "of TranslationModel0 (its value 2 of 2)"),
        # values: in range each, their sum not
        (WEIGHTS.replace("LM0= 0.5", "LM0= 1").replace("CSLM0= 0.3", "CSLM0= 1"),
         "1 ||| x ||| LM0= 1.7e308 WordPenalty0= 0 TranslationModel0= 0 0 CSLM0= 1.7e308 ||| 0\n", 3,
         "the value 1.7e+308 of CSLM0 times its weight 1 ("),
    ],
)  # fmt: skip
def test_weighted_sums_beyond_the_floating_point_range_are_refused(
    inputs: dict[str, Path],
    tmp_path: Path,
    weights: str,
    list_line: str | None,
    code: int,
    said: str,
    monkeypatch,
    capsys,
) -> None:
    """Totals of inf or NaN would choose the first hypothesis of every sentence: refused, naming the
    feature, the weights file or the list's line, with no numpy warning."""
    import warnings

    if list_line is not None:
        inputs["nbest"].write_text(NBEST.replace(NBEST.splitlines(keepends=True)[2], list_line))
    inputs["weights"].write_text(weights)
    out = tmp_path / "out"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got, err = run_cli(["rerank", str(inputs["nbest"]), str(inputs["weights"]), str(out)], monkeypatch, capsys)
    assert got == code, err
    where = f"{inputs['nbest']}:3: " if list_line else f"{inputs['weights']}: "
    assert err.count("\n") == 1 and where in err and said in err and "beyond the floating-point range" in err
    assert not caught and "Warning" not in err and not out.exists()


def test_rerank_tune_refuses_start_weights_beyond_the_range_before_tuning(
    inputs: dict[str, Path], failing_moses: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    init = tmp_path / "init.weights"
    init.write_text(WEIGHTS.replace("LM0= 0.5", "LM0= -1e308"))
    out = tmp_path / "out.weights"
    code, err = run_cli(_tune(inputs, failing_moses, str(out), "--init", str(init)), monkeypatch, capsys)
    assert code == 2, err
    assert f"{init}: the weight -1e+308 of LM0 times its value -10.5 on {inputs['nbest']}:1" in err
    assert "started" not in err and not out.exists()


@pytest.mark.parametrize(
    ("value", "init_weight", "code", "said"),
    [
        ("-1e39", "0.5", 3, "{nbest}:3: the value -1e+39 of CSLM0 is beyond what Moses' extractor and mert hold"),
        ("-1", "-1e39", 2, "{init}: the start weight -1e+39 of LM0 is beyond what Moses' extractor and mert hold"),
    ],
)
def test_rerank_tune_refuses_what_moses_single_precision_floats_cannot_hold(
    inputs: dict[str, Path],
    failing_moses: Path,
    tmp_path: Path,
    value: str,
    init_weight: str,
    code: int,
    said: str,
    monkeypatch,
    capsys,
) -> None:
    """Finite here, inf in Moses' extractor and mert (float): the weights tuned on it would be
    meaningless. Refused before Moses starts, naming the list's line or the start weights."""
    inputs["nbest"].write_text(NBEST.replace("CSLM0= -1 |||", f"CSLM0= {value} |||"))
    init = tmp_path / "init.weights"
    init.write_text(WEIGHTS.replace("LM0= 0.5", f"LM0= {init_weight}").replace("CSLM0= 0.3", "CSLM0= 1e-300"))
    out = tmp_path / "out.weights"
    got, err = run_cli(_tune(inputs, failing_moses, str(out), "--init", str(init)), monkeypatch, capsys)
    assert got == code, err
    assert err.count("\n") == 1 and said.format(nbest=inputs["nbest"], init=init) in err
    assert "started" not in err and not out.exists()


@pytest.mark.parametrize(("value", "init_weight", "left_out"), [("-1e39", "0.5", "CSLM0"), ("-1", "-1e39", "LM0")])
def test_rerank_tune_leaves_out_what_moses_could_not_hold(
    inputs: dict[str, Path],
    failing_moses: Path,
    tmp_path: Path,
    value: str,
    init_weight: str,
    left_out: str,
    monkeypatch,
    capsys,
) -> None:
    """The value or start weight that would be refused, of a feature --leave-out takes out of
    what Moses is given: not refused, Moses' extractor started (here the failing one)."""
    inputs["nbest"].write_text(NBEST.replace("CSLM0= -1 |||", f"CSLM0= {value} |||"))
    init = tmp_path / "init.weights"
    init.write_text(WEIGHTS.replace("LM0= 0.5", f"LM0= {init_weight}"))
    args = _tune(inputs, failing_moses, str(tmp_path / "out.weights"), "--init", str(init), "--leave-out", left_out)
    code, err = run_cli(args, monkeypatch, capsys)
    assert code == 6 and "extractor failed (exit 1)" in err and "started" in err, err


def test_rerank_mbr_of_a_huge_scale_warns_nothing(inputs: dict[str, Path], tmp_path: Path, monkeypatch, capsys) -> None:
    """scale * (total - the highest) below the range is a weight of 0, as its exp would be: no warning."""
    import warnings

    inputs["weights"].write_text(WEIGHTS.replace("CSLM0= 0.3", "CSLM0= 3"))  # totals -29.95 and -15.7
    out = tmp_path / "out"
    argv = ["rerank", str(inputs["nbest"]), str(inputs["weights"]), str(out), "--mbr", "--mbr-scale", "1e308"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, err = run_cli(argv, monkeypatch, capsys)
    assert code == 0, err
    assert not caught and "Warning" not in err
    assert out.read_text() == "un chien .\n\nune femme\n"  # all the mass on the highest total
