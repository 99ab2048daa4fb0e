"""Options of the commands where text passes between a person and a Moses table.

Phrases typed by a person are put into the table's form (``moses.tokenizer.table_form``: tokenized,
escaped, lowercased for a lowercased table) in the language the model file records, and the
phrases printed for people are unescaped (``--detok``: detokenized). ``--raw`` speaks the
table's own form both ways.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ..model.checkpoint import Checkpoint
from ..moses import tokenizer
from ..moses.words import split_words
from .common import UserError


def _language(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return tokenizer.check_language(value)
    except ValueError as e:
        raise click.BadParameter(str(e), ctx=ctx, param=param) from e


def language_option(side: str, help: str) -> Callable[..., Any]:
    return click.option(f"--{side}-lang", metavar="LANG", callback=_language, help=help)


def typed_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--raw, --source-lang, --lowercase/--keep-case."""
    f = click.option(
        "--lowercase/--keep-case",
        "lowercase",
        default=None,
        help="Lowercase typed phrases (as lowercase.perl)  [default: when the model's "
        "source vocabulary has no uppercase letters]",
    )(f)
    f = language_option(
        "source",
        "Language of typed phrases, for Moses tokenization "
        "(tokenizer.perl -l LANG)  [default: the one the model file records]",
    )(f)
    return click.option(
        "--raw",
        is_flag=True,
        help="Phrases in and out in the table's own form: typed phrases are looked up "
        "exactly as given (tokens split at spaces, no escaping, no lowercasing) "
        "and phrases are printed escaped, as in the table.",
    )(f)


def detok_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--detok, --target-lang (after typed_options, which gives --source-lang)."""
    f = language_option("target", "Language of target phrases, for --detok  [default: the one the model file records]")(
        f
    )
    return click.option(
        "--detok",
        is_flag=True,
        help="Print phrases detokenized (detokenizer.perl -l LANG) rather than as "
        "unescaped tokens (text report only; tsv and json keep the table's form).",
    )(f)


def _need(lang: str | None, side: str, model: str, why: str, instead: str) -> str:
    if lang is None:
        raise UserError(
            f"{model} does not record the language of its {side} side (train with --{side}-lang "
            f"to record it): give --{side}-lang LANG (e.g. en, fr) {why}, or {instead}"
        )
    return lang


class TypedPhrases:
    """Phrases typed by a person, put into the table's form of the model's source side."""

    def __init__(self, ckpt: Checkpoint, model: str, raw: bool, source_lang: str | None, lowercase: bool | None):
        self.raw = raw
        self.lang = None if raw else (source_lang or ckpt.source_lang)
        self.lowercase = tokenizer.is_lowercased(ckpt.src_vocab.tokens) if lowercase is None else lowercase
        self._model = model

    def table_form(self, typed: str) -> str:
        """``typed`` as the table writes it; with --raw, its tokens joined by single spaces."""
        if self.raw:
            return " ".join(split_words(typed))
        if tokenizer.has_escapes(typed):
            click.echo(
                f"warning: {typed!r} holds Moses escapes (&apos;, &amp; ...) that will be escaped "
                "once more; use --raw to look up text in the table's own form",
                err=True,
            )
        lang = _need(
            self.lang,
            "source",
            self._model,
            "to Moses-tokenize typed phrases",
            "--raw to look them up exactly as typed",
        )
        return tokenizer.table_form(typed, lang, self.lowercase)


def display(
    ckpt: Checkpoint,
    model: str,
    raw: bool,
    detok: bool = False,
    source_lang: str | None = None,
    target_lang: str | None = None,
) -> tokenizer.Display:
    """How phrases are printed for people (--raw: as in the table; --detok: detokenized)."""
    if raw:
        if detok:
            raise UserError("--detok and --raw exclude each other: --raw prints the table's own form")
        return tokenizer.AS_IN_TABLE
    if not detok:
        return tokenizer.Display()
    why, instead = "to detokenize phrases", "leave out --detok"
    return tokenizer.Display(
        source_lang=_need(source_lang or ckpt.source_lang, "source", model, why, instead),
        target_lang=_need(target_lang or ckpt.target_lang, "target", model, why, instead),
    )
