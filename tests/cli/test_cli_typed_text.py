"""Where Moses text meets people on the command line: typed phrases looked up in the table's form,
phrases printed readable, languages from the model file (or asked for), --raw as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from phrase_rescorer.analysis import suggest as sug
from phrase_rescorer.cli import cli
from phrase_rescorer.model.checkpoint import load_checkpoint, save_checkpoint
from phrase_rescorer.moses.tokenizer import AS_IN_TABLE

# Phrases of the bundled table (lowercased, escaped) as a person types them.
MANS_PICTURE = ("A man's picture", "a man &apos;s picture")  # targets: (l&apos;) image d&apos; un homme
ARENT_SHOWING = ("Aren't showing", "aren &apos;t showing")  # target: n&apos; apparaissent pas


@pytest.fixture(scope="module")
def models(trained_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The tiny network with the sample's languages recorded, and the same weights without them
    (a model file written before languages were recorded)."""
    unknown = tmp_path_factory.mktemp("typed") / "unknown.pt"
    ckpt = load_checkpoint(str(trained_model))
    info = {**ckpt.info, "source_lang": None, "target_lang": None}
    save_checkpoint(str(unknown), ckpt.build_model(), ckpt.src_vocab, ckpt.tgt_vocab, info)
    return trained_model, unknown


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["-q", *args])


def run(*args: str) -> str:
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    return r.stdout


def test_suggest_looks_typed_phrases_up_in_the_tables_form(models: tuple[Path, Path], sample_table: Path) -> None:
    model = str(models[0])
    common = ("suggest", "-m", model, "--table", str(sample_table), "--beam-size", "3", "--samples", "0")
    (pic, arent, dont) = json.loads(run(*common, MANS_PICTURE[0], ARENT_SHOWING[0], "Don't", "--format", "json"))
    assert (pic["source"], pic["typed"]) == (MANS_PICTURE[1], MANS_PICTURE[0])
    assert pic["in_table"] is True and pic["unknown_words"] == 0  # &apos;s is in the shortlist
    assert (arent["source"], arent["in_table"]) == (ARENT_SHOWING[1], True)
    assert dont["source"] == "don &apos;t"
    text = run(*common, "Don't", MANS_PICTURE[0])
    assert "Don't    (looked up as: don &apos;t; " in text
    assert f"{MANS_PICTURE[0]}    (looked up as: {MANS_PICTURE[1]})\n" in text

    # --raw: looked up as typed, as before (the same report as the library gives the raw text)
    (raw,) = json.loads(run(*common, MANS_PICTURE[0], "--raw", "--format", "json"))
    assert (raw["source"], raw["typed"], raw["in_table"]) == (MANS_PICTURE[0], None, False)
    assert raw["unknown_words"] == 2  # "A" and "Man's"
    ckpt = load_checkpoint(model)
    known = sug.table_targets(str(sample_table), [MANS_PICTURE[0]])
    settings = sug.Settings(beam_size=3, samples=0)
    ref = sug.suggest(ckpt.build_model(), ckpt.src_vocab, ckpt.tgt_vocab, MANS_PICTURE[0], settings, known)
    assert run(*common, MANS_PICTURE[0], "--raw") == sug.format_text([ref], AS_IN_TABLE)
    # a phrase already in the table's form is refused nothing, but warned about
    r = invoke(*common, "don &apos;t")
    assert r.exit_code == 0 and "warning: 'don &apos;t' holds Moses escapes" in r.stderr


def test_case_follows_the_table_unless_told(models: tuple[Path, Path]) -> None:
    model = str(models[0])
    args = ("suggest", "-m", model, "--beam-size", "1", "--samples", "0", "--format", "json", "A Man")
    assert json.loads(run(*args))[0]["source"] == "a man"  # the sample's vocabulary is lowercase
    assert json.loads(run(*args, "--keep-case"))[0]["source"] == "A Man"


def test_people_read_unescaped_text_programs_get_the_tables(models: tuple[Path, Path], sample_table: Path) -> None:
    common = (
        "compare",
        "-m",
        str(models[0]),
        "-t",
        str(sample_table),
        "--scatter-pairs",
        "0",
        "--source",
        MANS_PICTURE[0],
        "--source",
        ARENT_SHOWING[0],
    )
    text = run(*common)
    assert "[1] a man 's picture    (2 targets" in text and "1. image d' un homme" in text
    assert "n' apparaissent pas" in text and "&apos;" not in text
    detok = run(*common, "--detok")
    assert "[1] a man's picture    (2 targets" in detok and "l'image d'un homme" in detok
    assert "[2] aren't showing" in detok and "n'apparaissent pas" in detok
    data = json.loads(run(*common, "--format", "json"))
    assert [s["source"] for s in data["sources"]] == [MANS_PICTURE[1], ARENT_SHOWING[1]]
    assert {r["target"] for r in data["sources"][0]["by_table"]} == {
        "image d&apos; un homme",
        "l&apos; image d&apos; un homme",
    }
    assert "d&apos; un homme" in run(*common, "--format", "tsv")
    raw = run(
        "compare",
        "-m",
        str(models[0]),
        "-t",
        str(sample_table),
        "--scatter-pairs",
        "0",
        "--raw",
        "--source",
        MANS_PICTURE[1],
    )
    assert "[1] a man &apos;s picture" in raw and "l&apos; image d&apos; un homme" in raw


def test_embed_labels_are_readable(models: tuple[Path, Path], tmp_path: Path) -> None:
    def source_labels(out: Path, *extra: str) -> list[str]:
        run("embed", "-m", str(models[0]), "-o", str(out), "--phrase", MANS_PICTURE[0], *extra)
        (phrase,) = (out / "phrases.metadata.tsv").read_text(encoding="utf-8").splitlines()[1:]
        return [phrase, *(out / "source-words.metadata.tsv").read_text(encoding="utf-8").splitlines()]

    readable = source_labels(tmp_path / "a")
    assert readable[0] == "a man 's picture\t4" and "'s" in readable and "&apos;s" not in readable
    raw = source_labels(tmp_path / "b", "--raw")
    assert raw[0] == "A man's picture\t3" and "&apos;s" in raw
    assert len(raw) == len(readable)  # one label per token id either way


def test_a_missing_language_is_asked_for(models: tuple[Path, Path]) -> None:
    unknown = str(models[1])
    r = invoke("suggest", "-m", unknown, "Don't")
    assert r.exit_code == 2
    assert f"{unknown} does not record the language of its source side" in r.stderr
    assert "give --source-lang LANG" in r.stderr and "--raw" in r.stderr
    args = ("suggest", "-m", unknown, "--beam-size", "1", "--samples", "0", "--format", "json")
    assert json.loads(run(*args, "Don't", "--source-lang", "en"))[0]["source"] == "don &apos;t"
    assert json.loads(run(*args, "Don't", "--raw"))[0]["source"] == "Don't"
    r = invoke(*args, "a man", "--detok", "--source-lang", "en")
    assert r.exit_code == 2 and "language of its target side" in r.stderr and "--target-lang" in r.stderr
    # nothing typed, nothing detokenized: no language needed
    run(
        "compare",
        "-m",
        unknown,
        "-t",
        str(Path(__file__).parents[1] / "data" / "sample.en-fr.phrase-table.gz"),
        "--scatter-pairs",
        "0",
        "--max-sources",
        "1",
    )
    r = invoke("suggest", "-m", unknown, "a", "--source-lang", "English")
    assert r.exit_code == 2 and "'English' is not a language code" in r.stderr
    r = invoke("suggest", "-m", str(models[0]), "a", "--raw", "--detok")
    assert r.exit_code == 2 and "--detok and --raw exclude each other" in r.stderr
