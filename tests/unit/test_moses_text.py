"""Moses text for people: typed text into the table's form, table phrases back to readable text."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from phrase_rescorer.data.pairs import load_pairs
from phrase_rescorer.moses.tokenizer import (
    AS_IN_TABLE,
    Display,
    check_language,
    detokenize,
    has_escapes,
    is_lowercased,
    table_form,
    unescape,
)
from tests.helpers.paths import PYTHON, SAMPLE, cli_env
from tests.helpers.rescore_data import tiny_checkpoint


@pytest.fixture(scope="module")
def sample_tokens() -> tuple[set[str], set[str]]:
    pairs = load_pairs(str(SAMPLE))
    src, tgt = pairs.build_vocabularies(10**6, 10**6)  # every token of each side
    return set(src.tokens[3:]), set(tgt.tokens[3:])


@pytest.mark.parametrize(
    ("typed", "lang", "expected"),
    [
        ("Don't", "en", "don &apos;t"),
        ("A man's picture", "en", "a man &apos;s picture"),
        ('"Keep clear" & <go> | [x]', "en", "&quot; keep clear &quot; &amp; &lt; go &gt; &#124; &#91; x &#93;"),
        ("state-of-the-art, Mr. Smith.", "en", "state-of-the-art , mr. smith ."),  # no -a; "Mr." kept
        ("L'homme d'affaires", "fr", "l&apos; homme d&apos; affaires"),
        ("   ", "en", ""),
    ],
)
def test_typed_text_takes_the_tables_form(typed: str, lang: str, expected: str) -> None:
    assert table_form(typed, lang, lowercase=True) == expected


def test_case_is_kept_unless_asked() -> None:
    assert table_form("A Man's", "en", lowercase=False) == "A Man &apos;s"


def test_typed_examples_are_phrases_of_the_bundled_table(sample_tokens: tuple[set[str], set[str]]) -> None:
    src, _ = sample_tokens
    assert {"&apos;t", "&apos;s", "&quot;", "&amp;"} <= src  # the table is escaped ...
    assert not any(t != t.lower() for t in src)  # ... and lowercased
    for typed in ("Don't", "Aren't showing", "A man's picture", '"Keep clear"'):
        assert set(table_form(typed, "en", True).split()) <= src, typed
        assert not set(typed.split()) <= src  # as typed, the table does not know them


def test_unescape_undoes_exactly_the_tables_escaping(sample_tokens: tuple[set[str], set[str]]) -> None:
    from sacremoses import MosesTokenizer

    escape = MosesTokenizer("en").escape_xml  # tokenizer.perl's escaping, as table_form applies it
    escaped = [t for side in sample_tokens for t in side if "&" in t]
    assert len(escaped) >= 20  # &apos;s, d&apos;, &quot;, &amp; ...
    for token in escaped:
        readable = unescape(token)
        assert "&apos;" not in readable and "&quot;" not in readable
        assert escape(readable) == token  # one to one: nothing lost in what people see
    assert unescape("d&apos; un &amp;apos; x &#124; y") == "d' un &apos; x | y"  # &amp; last, once
    assert unescape("no escapes") == "no escapes"


def test_detokenize_and_display() -> None:
    assert detokenize("vêtu d&apos; un t-shirt blanc", "fr") == "vêtu d'un t-shirt blanc"
    assert detokenize("don &apos;t look &quot; here &quot; .", "en") == 'don\'t look "here".'
    shown = Display(source_lang="en", target_lang="fr")
    assert shown.source("a man &apos;s hat") == "a man's hat"
    assert shown.target("l&apos; image d&apos; un homme") == "l'image d'un homme"
    assert Display().target("l&apos; image d&apos; un homme") == "l' image d' un homme"
    assert AS_IN_TABLE.target("l&apos; image") == "l&apos; image"


def test_lowercased_vocabulary_is_detected(sample_tokens: tuple[set[str], set[str]]) -> None:
    src, tgt = sample_tokens
    assert is_lowercased(src) and is_lowercased(tgt)
    words = sorted(src)[:2000]
    cased = [w.capitalize() if i % 50 == 0 else w for i, w in enumerate(words)]  # 2 % capitalised
    assert not is_lowercased(cased)
    assert is_lowercased(["<unk>", "&apos;s", "123", "é"])


def test_escapes_and_language_codes() -> None:
    assert has_escapes("don &apos;t") and has_escapes("a &amp; b") and not has_escapes("don't & co")
    assert check_language("en") == "en" and check_language("tdt") == "tdt"
    for bad in ("EN", "english", "e", "en-US", ""):
        with pytest.raises(ValueError, match="not a language code"):
            check_language(bad)


def test_rescoring_never_loads_sacremoses(tmp_path: Path) -> None:
    model = tiny_checkpoint(tmp_path / "m.pt")
    table = tmp_path / "t.txt"
    table.write_bytes(b"a &apos;s ||| d&apos; un ||| 0.5 0.5 0.5 0.5 ||| 0-0 ||| 1 1 1 ||| |||\n")
    script = (
        "import sys\n"
        "from phrase_rescorer.cli import rescore_main\n"
        f"sys.argv = ['rescore-phrase-table', '{table}', '{tmp_path / 'out.txt'}', '--model', '{model}', '-q']\n"
        "try:\n    rescore_main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('sacremoses' in sys.modules)\n"
    )
    r = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, env=cli_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
    out = (tmp_path / "out.txt").read_bytes()
    assert out.startswith(b"a &apos;s ||| d&apos; un ||| 0.5 0.5 0.5 0.5 ")  # the table's bytes, escapes kept
