"""``bundle``: a tuned hybrid system's files and settings in one directory; ``translate-hybrid``:
a text translated by it in one command."""

from __future__ import annotations

import click
from click.core import ParameterSource

from . import cli
from .common import (
    InputPath,
    NamedPath,
    UserError,
    batch_sentences_option,
    device_option,
    max_tokens_option,
    progress,
    resolve_device,
    say,
    threads_value_option,
    warn,
)

#: A parameter left at its default.
_DEFAULTS = (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)


@cli.command("bundle")
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False))
@click.option(
    "--ini",
    "ini",
    required=True,
    type=InputPath(dir_okay=False),
    help="The tuned moses.ini (mert-moses.pl's) that decodes the source; its paths absolute.",
)
@click.option(
    "--weights",
    required=True,
    type=InputPath(dir_okay=False),
    help="The reranking weights (rerank-tune's): exactly the features of the bundle's lists.",
)
@click.option(
    "-m",
    "--model",
    "models",
    multiple=True,
    type=NamedPath(),
    help="A CSLM (train-lm) or a translation network (train-nmt) whose feature is appended, as nbest -m; "
    "repeat for several, in the order they were given to nbest (named CSLM0, ..., NMT0, ... as nbest names them).",
)
@click.option(
    "--candidates",
    "candidates",
    multiple=True,
    type=NamedPath(),
    help="A (forward) translation network whose beam joins the decoder's list, as translate --n-best-list and "
    "merge-nbest --add; repeat for several (FromNet0, FromNet1, ... in the order given).",
)
@click.option(
    "--ensemble",
    is_flag=True,
    help="With several --candidates: they translate as one ensemble (translate -m A -m B --n-best-list), one beam "
    "and one list (FromNet0), as the weights were tuned on; networks of one vocabulary and units. Networks of both "
    "target orders (--right-to-left): one ensemble per order, a list each (FromNet0, FromNet1 in the order of each "
    "order's first network).",
)
@click.option(
    "--candidate-nbest",
    type=click.IntRange(1),
    default=None,
    help="Each candidate network's (with --ensemble, the ensemble's) candidates per sentence (translate "
    "--n-best-list FILE N)  [default: --beam-size].",
)
@click.option(
    "--beam-size",
    "--beam",
    "beam_size",
    type=click.IntRange(1),
    default=5,
    show_default=True,
    help="The candidate networks' beam width (translate --beam-size).",
)
@click.option(
    "--length-alpha",
    "--alpha",
    "alpha",
    type=click.FloatRange(0),
    default=0.6,
    show_default=True,
    help="The candidate networks' length normalisation (translate --length-alpha).",
)
@click.option(
    "--max-length",
    type=click.IntRange(1),
    help="The candidate networks' longest output, in units (translate --max-length)  [default: 2 x source + 10]",
)
@batch_sentences_option(
    "The sentences whose beams the candidate networks stepped together (translate --batch-sentences)."
)
@click.option(
    "--reached-only",
    is_flag=True,
    help="With --candidates: keep only the candidates the decoder can produce, as merge-nbest --reached-only "
    "made the lists the weights were tuned on (they name MosesReached).",
)
@click.option(
    "--moses-nbest",
    type=click.IntRange(1),
    help="With --candidates: join only the decoder's first N distinct hypotheses of each sentence, as "
    "merge-nbest --moses-nbest made the lists the weights were tuned on (at most --nbest)  [default: all].",
)
@click.option(
    "--nbest",
    "nbest",
    type=click.IntRange(1),
    default=100,
    show_default=True,
    help="The decoder's distinct n-best size (moses -n-best-list FILE N distinct), as for the tuning lists.",
)
@click.option(
    "--lm",
    "lm_path",
    type=InputPath(dir_okay=False),
    help="With --candidates: the n-gram LM (ARPA or KenLM binary) that gives new candidates their LM feature, as "
    "merge-nbest --lm (through bin/query of the Moses that translates); it must be the file of the ini's "
    "--lm-feature line  [default: that line's path=].",
)
@click.option(
    "--lm-feature",
    default=None,
    help="The name of that LM's feature in the ini and the decoder's lists (merge-nbest --lm-feature)  "
    "[default: the ini's first KENLM feature].",
)
@click.option("--moses", "moses_dir", type=click.Path(file_okay=False), help="Moses directory [default: $MOSES].")
@click.pass_context
def bundle(
    ctx: click.Context,
    directory: str,
    ini: str,
    weights: str,
    models: tuple[str, ...],
    candidates: tuple[str, ...],
    ensemble: bool,
    candidate_nbest: int | None,
    beam_size: int,
    alpha: float,
    max_length: int | None,
    batch: int,
    reached_only: bool,
    moses_nbest: int | None,
    nbest: int,
    lm_path: str | None,
    lm_feature: str | None,
    moses_dir: str | None,
) -> None:
    """Write the bundle DIR of a tuned hybrid system, for translate-hybrid: DIR/bundle.json (every
    setting; the networks' and the copies' size and SHA-256; the size, modification time and SHA-256
    of the n-gram LM and of every file the ini's path= stand for: the file, its .gz, .minphr,
    .minlexr, .binphr.* or .binlexr.* files, each file under a directory) and copies of the ini and
    the weights; translate-hybrid refuses any of them missing or changed (a file whose modification
    time alone changed is hashed again, and goes on when its content is the same).

    Refused before any work: DIR not new or empty, or in no writable directory (exit 6); a path=
    of the ini that is relative or stands for no file (exit 5); a -m that is no model file, a
    --candidates that is no forward translation network (exit 4); --ensemble of networks that
    cannot translate as one (another vocabulary, units or order) (exit 2); weights that do not name
    exactly the features the system's lists will have: the decoder's (moses -show-weights),
    FromMoses and FromNet0, ... with --candidates (FromNet0 alone with --ensemble), then one per
    -m, or --reached-only with weights that name no MosesReached, or --moses-nbest above --nbest
    (exit 2). The candidates' LM feature is that of the ini's --lm-feature line, its path= the
    n-gram LM (said on stderr; no KENLM feature: 0, with a warning); --lm, if given, must be that
    file. DIR appears complete or not at all.

    \b
    Example (the README's system: the CSLM and the network as features):
      phrase-rescorer bundle work/hybrid --ini work/mert-base/moses.ini --weights work/rerank.weights \\
          -m work/cslm.pt -m work/nmt.pt --nbest 100 --moses $MOSES
      phrase-rescorer translate-hybrid work/hybrid test.en test.hybrid.fr
    """
    from ..hybrid.bundle import write_bundle
    from ..hybrid.system import Candidates
    from ..moses.nbest import check_feature_name
    from ..moses.toolkit import find_moses

    try:
        if lm_feature is not None:
            check_feature_name(lm_feature)
    except ValueError as e:
        raise UserError(f"--lm-feature: {e}") from e
    beams = (("--candidate-nbest", "candidate_nbest"), ("--max-length", "max_length"), ("--beam-size", "beam_size"),
             ("--length-alpha", "alpha"), ("--batch-sentences", "batch"))  # fmt: skip
    given = [option for option, name in beams if ctx.get_parameter_source(name) not in _DEFAULTS]
    if not candidates and given:
        raise UserError(f"{' and '.join(given)} without --candidates: they set the candidate networks' beams")
    if not candidates and reached_only:
        raise UserError("--reached-only without --candidates: it keeps the candidates the decoder can produce")
    if not candidates and moses_nbest is not None:
        raise UserError("--moses-nbest without --candidates: it says how many of the decoder's hypotheses they join")
    if len(candidates) < 2 and ensemble:
        raise UserError("--ensemble needs two --candidates or more: they translate as one ensemble")
    if not candidates and lm_path is not None:
        raise UserError("--lm without --candidates: the LM gives the candidates' LM feature only")
    size = beam_size if candidate_nbest is None else candidate_nbest
    if size > beam_size:
        raise UserError(
            f"--candidate-nbest {size}: the beam finishes at most --beam-size ({beam_size}) candidates; "
            f"give --beam-size {size} or more"
        )
    toolkit = find_moses(moses_dir, needs=("bin/moses",))
    made = write_bundle(
        directory,
        toolkit,
        ini=ini,
        weights=weights,
        models=models,
        candidates=Candidates(
            tuple(candidates),
            size,
            beam_size,
            alpha,
            max_length,
            reached_only=reached_only,
            ensemble=ensemble,
            moses_nbest=moses_nbest,
            batch=batch,
        )
        if candidates
        else None,
        nbest=nbest,
        ngram_lm=lm_path,
        lm_feature=lm_feature,
        on_note=lambda message: say(ctx, message),
        on_warning=warn,
    )
    lists = made.candidates.lists if made.candidates is not None else 0
    say(
        ctx,
        f"{directory}: a bundle of {len(made.layout)} features ({', '.join(name for name, _ in made.layout)}); "
        f"the decoder's {nbest}-best lists"
        + (f" (the first {moses_nbest} of a sentence joined by the candidates)" if moses_nbest is not None else "")
        + (
            f", {len(candidates)} candidate network(s)"
            + ("" if not ensemble else " as one ensemble" if lists == 1 else " as an ensemble per target order")
            + f" of beam {beam_size}, {size} {'in all' if ensemble and lists == 1 else 'each'}"
            if candidates
            else ""
        ),
    )


@cli.command("translate-hybrid")
@click.argument("bundle_dir", metavar="BUNDLE", type=click.Path(file_okay=False))
@click.argument("in_path", metavar="IN", type=click.Path(allow_dash=True, readable=False))
@click.argument("out_path", metavar="OUT", type=click.Path(allow_dash=True, readable=False))
@click.option(
    "--chunk-lines",
    type=click.IntRange(1),
    default=500,
    show_default=True,
    help="Lines translated together: memory holds one chunk, and the decoder loads its tables once per chunk "
    "(rounded up to whole groups of the bundle's sentences searched together).",
)
@click.option(
    "--tokenize", metavar="LANG", help="IN is raw text: tokenize it as tokenizer.perl -l LANG (sacremoses) first."
)
@click.option("--lowercase", is_flag=True, help="With --tokenize: also lowercase, for a lowercased system.")
@click.option(
    "--detokenize", metavar="LANG", help="Write OUT as running text, as detokenizer.perl -l LANG (sacremoses) joins it."
)
@click.option("--moses", "moses_dir", type=click.Path(file_okay=False), help="Moses directory [default: $MOSES].")
@max_tokens_option
@device_option
@threads_value_option(
    "Threads of the decoder (-threads) and of the networks: a number or 'all'  "
    "[default: 1, or OMP_NUM_THREADS when set]."
)
@click.pass_context
def translate_hybrid(
    ctx: click.Context,
    bundle_dir: str,
    in_path: str,
    out_path: str,
    chunk_lines: int,
    tokenize: str | None,
    lowercase: bool,
    detokenize: str | None,
    moses_dir: str | None,
    max_tokens: int,
    device: str,
    threads: int,
) -> None:
    """Translate IN (one sentence a line; - for stdin; compressed by content) with the hybrid system
    of BUNDLE (written by bundle) and write OUT (one line per line of IN, in order; compressed by
    name; - for stdout, written chunk by chunk).

    Each chunk of --chunk-lines lines goes through the steps of the pipeline, the same functions
    the step-by-step commands run: the decoder's distinct n-best list (moses -n-best-list N
    distinct), the candidate networks' beams merged in (translate --n-best-list, merge-nbest), the
    networks' features (nbest), each sentence's best hypothesis under the weights (rerank). Every
    file of the bundle is checked first: a missing or changed one is refused, naming it (exit 2).
    Before that, IN (a regular file) is read through once, each line checked (UTF-8, --max-tokens),
    so that a bad line is refused before any decoding; stdin (or a pipe), read once, is checked
    chunk by chunk as it streams. OUT may be none of the bundle's files.
    An interrupted run leaves no OUT file and stops the decoder.

    \b
    Example:
      phrase-rescorer translate-hybrid work/hybrid test.en test.hybrid.fr --moses $MOSES
      zcat raw.en.gz | phrase-rescorer translate-hybrid work/hybrid - - --tokenize en --detokenize fr
    """
    from ..hybrid.bundle_read import read_bundle
    from ..hybrid.text import TextForm, check_input, translate_file
    from ..hybrid.translate import HybridSystem
    from ..moses.tokenizer import check_language
    from ..moses.toolkit import find_moses
    from ..output import AtomicOutput, check_output_path
    from ..output_paths import check_not_an_input

    for option, value in (("--tokenize", tokenize), ("--detokenize", detokenize)):
        if value is not None:
            try:
                check_language(value)
            except ValueError as e:
                raise UserError(f"{option}: {e}") from e
    if lowercase and tokenize is None:
        raise UserError("--lowercase without --tokenize: it lowercases the text --tokenize writes")
    check_output_path(out_path)
    check_not_an_input(out_path, (("input", in_path),))
    form = TextForm(tokenize, lowercase, detokenize)
    if in_path != "-":
        InputPath(dir_okay=False).convert(in_path, None, ctx)
    check_input(in_path, form, max_tokens)
    system_bundle = read_bundle(bundle_dir, on_note=lambda message: say(ctx, message))
    networks = [path for _, path in system_bundle.models]
    if system_bundle.candidates is not None:
        networks += system_bundle.candidates.networks
    inputs = [("model file", path) for path in networks]
    named = (*inputs, ("moses.ini", system_bundle.ini), ("weights", system_bundle.weights_path))
    check_not_an_input(out_path, (*named, *system_bundle.paths()))
    needs = ("bin/moses", "bin/query") if system_bundle.ngram_lm and system_bundle.candidates else ("bin/moses",)
    toolkit = find_moses(moses_dir, needs=needs)
    dev = resolve_device(device)
    with (
        HybridSystem(
            system_bundle, toolkit, threads=threads, device=dev, max_tokens=max_tokens, on_warning=warn
        ) as system,
        progress(ctx, "translate-hybrid", " lines") as bar,
        AtomicOutput(out_path, on_warning=warn) as out,
    ):
        summary = translate_file(system, in_path, out, chunk_lines=chunk_lines, form=form, on_progress=bar.update_to)
    say(ctx, f"{in_path}: {summary.lines:,} lines translated with {bundle_dir} in {summary.chunks:,} chunk(s)")
    if system.origins is not None:
        say(ctx, f"chosen: {system.origins.summary()}")
