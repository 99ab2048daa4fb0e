"""What the experiment checks and prepares before tuning: finding Moses, starting weights,
refusals (unreadable tables, dev/test lengths, a model trained on another table, changed settings)."""

from __future__ import annotations

import gzip
import os
import stat
from pathlib import Path

import pytest

from phrase_rescorer.experiment.settings import Settings, check, check_models, check_resume, target_lang
from phrase_rescorer.experiment.systems import (
    RNN,
    RNN_FIRST,
    ExperimentError,
    check_coverage,
    prepare_system,
    systems_for,
)
from phrase_rescorer.moses.ini_weights import features, reset_weights
from phrase_rescorer.moses.phrase_table import Entry, parse_line, with_appended, without_appended
from phrase_rescorer.moses.toolkit import MosesNotFound, find_moses
from tests.helpers.analysis_model import train_tiny
from tests.helpers.paths import REPO
from tests.helpers.rescore_data import tiny_checkpoint

TINY = REPO / "tests" / "data" / "tiny-moses"
TUNED_INI = """[feature]
UnknownWordPenalty
WordPenalty
PhrasePenalty
PhraseDictionaryMemory name=TranslationModel0 num-features=5 path=/m/pt.gz input-factor=0 output-factor=0
LexicalReordering name=LexicalReordering0 num-features=6 type=wbe-msd-bidirectional-fe-allff path=/m/r.gz
Distortion
KENLM name=LM0 factor=0 path=/m/lm.gz order=5
SomeSparseFeature name=Odd

[weight]
LexicalReordering0= 0.0656372 0.113528 0.0184473 0.215957 -0.0156738 0.100603
Distortion0= 0.0411833   # tuned
LM0= 0.0788567
WordPenalty0= -0.0997411
PhrasePenalty0= 0.0517768
TranslationModel0= 0.0912844 0.00190324 0.0646386 0.0407692 0.7
UnknownWordPenalty0= 1
Odd= 0.42
"""


def local_ini(tmp_path: Path) -> Path:
    ini = tmp_path / "moses.ini"
    ini.write_text((TINY / "moses.ini").read_text().replace("@MODEL_DIR@", str(TINY)))
    return ini


def test_reset_weights_gives_train_model_perl_starting_values() -> None:
    text, kept = reset_weights(TUNED_INI, added={"TranslationModel0": 1}, added_weight=0.25)
    weights = text.split("[weight]\n", 1)[1].splitlines()
    assert weights == [
        "LexicalReordering0= 0.3 0.3 0.3 0.3 0.3 0.3",
        "Distortion0= 0.3   # tuned",
        "LM0= 0.5",
        "WordPenalty0= -1",
        "PhrasePenalty0= 0.2",
        "TranslationModel0= 0.2 0.2 0.2 0.2 0.25",
        "UnknownWordPenalty0= 1",
        "Odd= 0.42",
    ]
    assert kept == ["Odd"]
    assert text.split("[weight]")[0] == TUNED_INI.split("[weight]")[0]  # [feature] untouched


def test_features_are_named_as_moses_names_them() -> None:
    names = [f.name for f in features(TUNED_INI.splitlines(keepends=True))]
    assert names[:3] == ["UnknownWordPenalty0", "WordPenalty0", "PhrasePenalty0"]
    assert "Distortion0" in names and "LM0" in names and "Odd" in names


def fake_moses(root: Path, executable: bool = True) -> Path:
    for rel in ("bin/moses", "bin/mert", "bin/extractor", "scripts/training/mert-moses.pl"):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        if executable or not rel.startswith("bin/moses"):
            path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return root


def test_find_moses(tmp_path: Path) -> None:
    root = fake_moses(tmp_path / "moses")
    assert find_moses(str(root)).decoder == str(root / "bin" / "moses")
    assert find_moses(None, environ={"MOSES": str(root)}).root == str(root)
    assert find_moses(str(root), environ={"MOSES": "/nowhere"}).root == str(root)  # --moses first
    with pytest.raises(MosesNotFound, match="give --moses DIR or set MOSES"):
        find_moses(None, environ={})
    with pytest.raises(MosesNotFound, match=r"\$MOSES\): no such directory"):
        find_moses(None, environ={"MOSES": str(tmp_path / "nowhere")})
    os.unlink(root / "bin" / "mert")
    with pytest.raises(MosesNotFound, match="bin/mert is missing"):
        find_moses(str(root))
    broken = fake_moses(tmp_path / "broken", executable=False)
    with pytest.raises(MosesNotFound, match="bin/moses is not executable"):
        find_moses(str(broken))


def settings(tmp_path: Path, **changes) -> Settings:
    values = dict(
        ini=changes.pop("ini", None) or str(local_ini(tmp_path)),
        dev=(str(TINY / "dev.en"), str(TINY / "dev.fr")),
        test=(str(TINY / "test.en"), str(TINY / "test.fr")),
        out_dir=str(tmp_path / "out"),
    )
    values.update(changes)
    return Settings(**values)  # type: ignore[arg-type]


def test_check_accepts_the_tiny_system(tmp_path: Path) -> None:
    assert check(settings(tmp_path))[0] == str(TINY / "phrase-table.gz")


def test_dev_and_test_lengths_must_match(tmp_path: Path) -> None:
    short = tmp_path / "short.fr"
    short.write_text("une ligne\n")
    with pytest.raises(ExperimentError, match=r"dev files differ in length .*short.fr: 1 lines"):
        check(settings(tmp_path, dev=(str(TINY / "dev.en"), str(short))))
    with pytest.raises(ExperimentError, match="test files differ in length"):
        check(settings(tmp_path, test_raw_reference=str(short)))


def test_dev_and_test_files_are_read_by_content_before_any_work(tmp_path: Path) -> None:
    """A reference that is not UTF-8 is refused with its line, a compressed one (which Moses'
    decoder and mert-moses.pl read as plain text only) by name, not with a traceback later."""
    bad = tmp_path / "bad.fr"
    bad.write_bytes(b"".join(TINY.joinpath("dev.fr").read_bytes().splitlines(keepends=True)[:3]) + b"\xff\xfe\n" * 5)
    with pytest.raises(ExperimentError, match=r"bad.fr:4: invalid UTF-8 at byte 0") as e:
        check(settings(tmp_path, dev=(str(TINY / "dev.en"), str(bad))))
    assert e.value.exit_code == 3
    packed = tmp_path / "dev.fr"  # compressed under a plain name: told by content
    packed.write_bytes(gzip.compress(TINY.joinpath("dev.fr").read_bytes()))
    with pytest.raises(
        ExperimentError, match=r"dev.fr: gzip-compressed: Moses .* reads the dev and test sets as plain"
    ):
        check(settings(tmp_path, dev=(str(TINY / "dev.en"), str(packed))))


def test_unreadable_tables_are_refused(tmp_path: Path) -> None:
    ini = local_ini(tmp_path)
    ini.write_text(ini.read_text().replace(str(TINY / "lm.fr.3gram.arpa.gz"), str(tmp_path / "lm.gz")))
    with pytest.raises(ExperimentError, match=r"moses.ini:\d+: LM0 points at .*lm.gz, which cannot be read") as e:
        check(settings(tmp_path, ini=str(ini)))
    assert e.value.exit_code == 5


def test_a_model_of_another_table_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.gz"
    with gzip.open(other, "wt", encoding="utf-8") as f:
        for i in range(50):
            f.write(f"der Mann {i} ||| the man {i} ||| 0.5 0.5 0.5 0.5 ||| 0-0 ||| 1 1 1\n")
    model = tmp_path / "rnn.pt"
    train_tiny(other, model, steps=2)
    src, tgt = check_coverage(str(other), str(model), 0.5)
    assert src == 1.0 and tgt == 1.0
    with pytest.raises(ExperimentError, match=r"covers 0.0% of the source and 0.0% of the target") as e:
        check_coverage(str(TINY / "phrase-table.gz"), str(model), 0.5)
    assert e.value.exit_code == 4


def test_a_restart_with_other_settings_is_refused(tmp_path: Path) -> None:
    first = settings(tmp_path)
    os.makedirs(first.out_dir)
    check_resume(first)
    check_resume(settings(tmp_path, runs=5, threads=2))  # more runs, other threads: fine
    with pytest.raises(ExperimentError, match="other settings .*seed: was 1, now 2"):
        check_resume(settings(tmp_path, seed=2))


def test_the_reranking_list_size_is_fixed_by_the_first_start_that_decodes_lists(tmp_path: Path) -> None:
    """No list is decoded while no --lm or --nmt is given, so --rerank-nbest is not yet part of
    the experiment: the first start with one fixes it, a start without one leaves it, and a
    later start with another size is refused."""
    first = settings(tmp_path, rerank_nbest=1000)
    os.makedirs(first.out_dir)
    check_resume(first)
    with pytest.raises(ExperimentError, match="other settings .*seed: was 1, now 2"):
        check_resume(settings(tmp_path, lm="lm.pt", rerank_nbest=50, seed=2))  # refused: fixes nothing
    check_resume(settings(tmp_path, lm="lm.pt", rerank_nbest=20))  # the first with lists: fixes 20
    check_resume(settings(tmp_path, rerank_nbest=500))  # no lists now: nothing to compare
    check_resume(settings(tmp_path, nmt=("nmt.pt",), rerank_nbest=20))
    with pytest.raises(ExperimentError, match="other settings .*rerank_nbest: was 20, now 200"):
        check_resume(settings(tmp_path, lm="lm.pt", rerank_nbest=200))


def test_systems() -> None:
    assert [s.key for s in systems_for(False, False)] == ["baseline"]
    assert [s.key for s in systems_for(True, False)] == ["baseline", "rnn"]
    assert [s.columns for s in systems_for(True, True)] == [0, 1, 2]


def test_target_language_from_the_option_or_the_model_file(tmp_path: Path) -> None:
    unknown, known = tmp_path / "unknown.pt", tmp_path / "known.pt"
    train_tiny(TINY / "phrase-table.gz", unknown, steps=1, languages=(None, None))
    train_tiny(TINY / "phrase-table.gz", known, steps=1, languages=("en", "fr"))

    def language(**given: str) -> str:
        chosen = settings(tmp_path, **given)
        return target_lang(chosen, check_models(chosen))

    assert language(target_lang="fr") == "fr"
    with pytest.raises(ExperimentError, match="the target language is unknown .*--target-lang"):
        language(model=str(unknown))
    assert language(model=str(known)) == "fr"
    assert language(model=str(known), target_lang="de") == "de"  # the option first
    with pytest.raises(ExperimentError, match="--target-lang: 'French' is not a language code"):
        language(target_lang="French")


@pytest.mark.parametrize("wider", RNN_FIRST, ids=lambda s: s.key)
def test_the_rnn_table_is_cut_from_a_wider_one_byte_for_byte(tmp_path: Path, wider) -> None:  # type: ignore[no-untyped-def]
    """+ RNN's table, cut from a system's whose first added column is the network's, is the
    table rescored with the network alone, byte for byte."""
    forward, other = tiny_checkpoint(tmp_path / "fwd.pt", seed=1), tiny_checkpoint(tmp_path / "inv.pt", seed=2)
    table, ini = str(TINY / "phrase-table.gz"), str(local_ini(tmp_path))
    said: list[str] = []
    for out, systems in (("cut", [wider, RNN]), ("alone", [RNN])):
        for system in systems:
            prepare_system(
                system, ini, table, str(forward), str(tmp_path / out), inverse_model=str(other), on_progress=said.append
            )
    cut = tmp_path / "cut" / "tables" / "phrase-table.rnn.gz"
    assert (
        said.count(
            f"{cut}: {tmp_path / 'cut' / 'tables' / f'phrase-table.{wider.key}.gz'} without its last 1 column(s)"
        )
        == 1
    )
    assert gzip.decompress(cut.read_bytes()) == gzip.decompress(
        (tmp_path / "alone" / "tables" / "phrase-table.rnn.gz").read_bytes()
    )


@pytest.mark.parametrize("terminator", [b"\n", b"\r\n", b""])
@pytest.mark.parametrize("rest", [b"", b" ||| 0-0 ||| 1 1 1", b" ||| ||| |||"])
def test_without_appended_undoes_with_appended(terminator: bytes, rest: bytes) -> None:
    raw = b"a b ||| x y ||| 0.5 1e-05 0.25" + rest
    source, target, end = parse_line(raw, "t", 1)
    entry = Entry(1, raw, terminator, source, target, end)
    line = with_appended(entry, b"0.125 2.5")
    source, target, end = parse_line(line[: len(line) - len(terminator)], "t", 1)
    appended = Entry(1, line[: len(line) - len(terminator)], terminator, source, target, end)
    assert without_appended(appended, 2) == raw + terminator
    assert without_appended(appended, 1) == with_appended(entry, b"0.125")
    assert without_appended(appended, 0) == line
