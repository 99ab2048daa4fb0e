"""``nbest``: sentence-level features (the CSLM, translation networks) appended to a Moses n-best list;
``merge-nbest``: other systems' candidates merged into one."""

from __future__ import annotations

import contextlib

import click

from . import cli
from .common import (
    InputPath,
    NamedPath,
    UserError,
    device_option,
    max_tokens_option,
    progress,
    resolve_device,
    say,
    threads_option,
    threads_value_option,
    warn,
)


@cli.command("nbest")
@click.argument("in_path", metavar="IN", type=click.Path(allow_dash=True, readable=False))
@click.argument("out_path", metavar="OUT", type=click.Path(allow_dash=True, readable=False))
@click.option(
    "-m",
    "--model",
    "model_paths",
    required=True,
    multiple=True,
    type=NamedPath(),
    help="A CSLM (train-lm) or a translation network (train-nmt); repeat for several "
    "features, appended in the order given.",
)
@click.option(
    "--name",
    "names",
    multiple=True,
    help="The features' names in the n-best list, one per -m in the same order (Moses' "
    "style: a name and an index)  [default: CSLM0, CSLM1, ... for CSLMs, NMT0, "
    "NMT1, ... for translation networks]",
)
@click.option(
    "--source",
    "source_path",
    type=click.Path(allow_dash=False),
    help="The tokenized source text the n-best list translates (line i for sentence ID "
    "i, as given to the decoder); needed by translation networks.",
)
@click.option(
    "--word-penalty",
    is_flag=True,
    help="Also append WordPenalty0= minus the hypothesis' words, as Moses' word penalty, after the models' "
    "features: for a network's n-best list (translate --n-best-list), which lacks it, so that the reranker "
    "can weigh length; a decoder's list has it already (refused).",
)
@max_tokens_option
@device_option
@threads_option
@click.pass_context
def nbest(
    ctx: click.Context,
    in_path: str,
    out_path: str,
    model_paths: tuple[str, ...],
    names: tuple[str, ...],
    source_path: str | None,
    word_penalty: bool,
    max_tokens: int,
    device: str,
) -> None:
    """Append sentence-level features to the Moses n-best list IN, writing OUT (compressed by
    name; - for stdin/stdout).

    Every line of IN is kept in order and byte for byte, with `NAME= value` added at the end of
    its features field for each model:

    \b
    a CSLM                 ln p(hypothesis </s>), <s> before the first word (as KenLM's LM0
                           feature, but natural log); words outside its shortlist score p(<unk>)
    a translation network  ln p(hypothesis </s> | source sentence) (--source); trained with
                           --direction inverse: ln p(source </s> | hypothesis). Words outside
                           its shortlists score p(<unk>); subword networks know every word.

    The closing line says, for each model, how many of the hypotheses' words were outside its
    shortlist. A hypothesis or source sentence of more than --max-tokens tokens is refused before
    any line is scored (a list read from a pipe: before its window is scored).

    With --word-penalty, WordPenalty0= minus the hypothesis' words follows them: a network's list
    then has what the decoder's lists have for length (the networks alone, reranked: a network or
    ensemble's n-best list scored by the networks and the word penalty, rerank-tune --init with
    the list's own feature at 1).

    \b
    Example (then rerank-tune and rerank):
      moses -f moses.ini -i dev.en -n-best-list dev.nbest 200 distinct > /dev/null
      phrase-rescorer nbest dev.nbest dev.scored.nbest -m cslm.pt -m nmt.pt --source dev.en
    """
    from ..model.files import CheckpointError
    from ..moses.nbest import check_feature_name
    from ..output import check_distinct_paths, check_output_path
    from ..scoring.features import WordPenaltyFeature, load_features, read_source_text
    from ..scoring.nbest import append_features

    if names and len(names) != len(model_paths):
        raise UserError(f"--name given {len(names)} times for {len(model_paths)} models: give one per -m, or none")
    for name in names:
        try:
            check_feature_name(name)
        except ValueError as e:
            raise UserError(f"--name: {e}") from e
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UserError(f"--name {twice[0]} given twice: each -m's feature needs a name of its own")
    check_output_path(out_path)  # before the networks are loaded and the list read
    for model_path in model_paths:
        check_distinct_paths(in_path, out_path, model=model_path)
    if source_path:
        check_distinct_paths(source_path, out_path)
    dev = str(resolve_device(device))
    sources = read_source_text(source_path, max_tokens) if source_path else None
    try:
        models = load_features(model_paths, names, sources, dev, on_warning=warn)
    except ValueError as e:
        if isinstance(e, CheckpointError):
            raise
        raise UserError(str(e)) from e
    if word_penalty and "WordPenalty0" in {f.name for f in models}:
        raise UserError("--name WordPenalty0 with --word-penalty: the word penalty's feature is WordPenalty0")
    features = [*models, *([WordPenaltyFeature()] if word_penalty else [])]
    with progress(ctx, "nbest", " lines") as bar:
        summary = append_features(
            in_path,
            out_path,
            features,
            sources=sources,
            source_path=source_path or "",
            max_tokens=max_tokens,
            on_progress=bar.update_to,
            on_warning=warn,
        )
        bar.update_to(summary.lines)
    say(
        ctx,
        f"{in_path}: {summary.lines:,} hypotheses of {summary.sentences:,} sentences scored in "
        f"{summary.seconds:.1f} s ({summary.lines / max(summary.seconds, 1e-9):,.0f} hypotheses/s); "
        f"feature{'s' if len(features) > 1 else ''} {', '.join(f.name for f in features)}; "
        + "; ".join(
            f"{summary.unknown[f.name]:,} of {summary.words:,} words outside the shortlist of {f.name}" for f in models
        ),
    )


@cli.command("merge-nbest")
@click.argument("moses_path", metavar="MOSES_NBEST", type=click.Path(allow_dash=True, readable=False))
@click.argument("out_path", metavar="OUT", type=click.Path(allow_dash=True, readable=False))
@click.option(
    "--add",
    "added",
    required=True,
    multiple=True,
    type=click.Path(allow_dash=True, readable=False),
    help="An n-best list of another system for the same input (translate --n-best-list); repeat for "
    "several, their indicators FromNet0, FromNet1, ... in the order given.",
)
@click.option(
    "--lm",
    "lm_path",
    type=InputPath(dir_okay=False),
    help="The n-gram LM (ARPA or KenLM binary) of the moses.ini that decoded MOSES_NBEST: the new "
    "hypotheses get its feature's value (through bin/query of --moses / $MOSES) [default: 0].",
)
@click.option(
    "--lm-feature",
    default="LM0",
    show_default=True,
    help="The name of that LM's feature in MOSES_NBEST (the KENLM line's name=).",
)
@click.option(
    "--ini",
    "ini_path",
    type=InputPath(dir_okay=False),
    help="The moses.ini that decoded MOSES_NBEST: Moses decodes each new hypothesis constrained to "
    "its words (its ConstrainedDecoding feature), and one it can produce gets Moses' own features "
    "and total; every line gets MosesReached= 1 or 0 (needs --source).",
)
@click.option(
    "--source",
    "source_path",
    type=InputPath(dir_okay=False),
    help="With --ini: the text MOSES_NBEST translates, one sentence a line.",
)
@click.option(
    "--reached-only",
    is_flag=True,
    help="With --ini: leave out the new hypotheses the moses.ini's model cannot produce (every line "
    "then MosesReached= 1): the reranker chooses among the decoder's derivations, some proposed by "
    "the other systems (--lm is then not needed: every line written has the decoder's own LM value).",
)
@click.option(
    "--moses-nbest",
    type=click.IntRange(min=1),
    help="Keep only Moses' first N distinct hypotheses of each sentence (its N best of a longer "
    "list; an added candidate among the rest is then new) [default: all].",
)
@threads_value_option("With --ini: the decoder's threads, a number or 'all' (Moses' -threads)  [default: 1].")
@click.option("--moses", "moses_dir", type=click.Path(file_okay=False), help="Moses directory [default: $MOSES].")
@click.pass_context
def merge_nbest(
    ctx: click.Context,
    moses_path: str,
    out_path: str,
    added: tuple[str, ...],
    lm_path: str | None,
    lm_feature: str,
    ini_path: str | None,
    source_path: str | None,
    reached_only: bool,
    moses_nbest: int | None,
    threads: int,
    moses_dir: str | None,
) -> None:
    """Merge the candidates of other systems (a network's beam: translate --n-best-list) into the
    Moses n-best list MOSES_NBEST, writing OUT (compressed by name; - for stdin/stdout): one list,
    each hypothesis once, every line with the same features, for nbest, rerank-tune and rerank.

    \b
    Moses' lines    kept byte for byte, in order (a hypothesis listed twice: its first line),
                    with FromMoses= 1; with --moses-nbest N only each sentence's first N
    new hypotheses  each added list's candidates not among Moses' lines kept, after them in their
                    sentence, with FromMoses= 0 and Moses' features: WordPenalty0 minus the number
                    of words, the LM feature (--lm-feature) ln 10 x KenLM's log10 p with --lm, as
                    the decoder computes both; every other value 0 (the decoder's phrase pairs,
                    reordering and phrase count of a hypothesis it did not produce are unknown:
                    FromMoses' own weight learns the offset); total 0
    every line      FromNetI= 1 when the I-th --add list proposed the hypothesis, else 0
    with --ini      a new hypothesis the moses.ini's model can produce (Moses decodes it
                    constrained to its words) gets Moses' features and total of its best
                    derivation; every line MosesReached= 1 (Moses' lines, those produced) or 0;
                    with --reached-only the lines of 0 are left out

    An added list's own features are not kept (nbest -m computes a network's for every line). Its
    sentence IDs are MOSES_NBEST's: an ID beyond them, or a list of fewer sentences, is refused.

    \b
    Example (the network's 12 best joined to Moses' 200 best, then scored and reranked):
      moses -f moses.ini -i test.en -n-best-list test.nbest 200 distinct > /dev/null
      phrase-rescorer translate test.en test.nmt.fr -m nmt.pt --beam-size 12 -n-best-list test.nmt.nbest 12
      phrase-rescorer merge-nbest test.nbest test.merged.nbest --add test.nmt.nbest --lm lm.fr.binary \\
          --ini moses.ini --source test.en
      phrase-rescorer nbest test.merged.nbest test.scored.nbest -m nmt.pt --source test.en
    """
    from ..lm.kenlm import KenLMSentences
    from ..moses.constrained import ConstrainedDecoder
    from ..moses.nbest import check_feature_name
    from ..moses.toolkit import find_moses
    from ..output import check_output_path
    from ..output_paths import check_not_an_input
    from ..reranking.merge import added_indicator
    from ..reranking.merge import merge_nbest as merge
    from ..scoring.features import read_source_text

    check_output_path(out_path)
    check_not_an_input(out_path, (("language model", lm_path), ("moses.ini", ini_path), ("source text", source_path)))
    stdin = [path for path in (moses_path, *added) if path == "-"]
    if len(stdin) > 1:
        raise UserError("'-' (stdin) given for more than one list: give the others as files")
    try:
        check_feature_name(lm_feature)
    except ValueError as e:
        raise UserError(f"--lm-feature: {e}") from e
    if moses_dir is not None and lm_path is None and ini_path is None:
        raise UserError("--moses without --lm or --ini: Moses is run for the LM's scores or constrained decoding only")
    if (ini_path is None) != (source_path is None):
        raise UserError("--ini and --source go together: the moses.ini that decoded the list, the text it translated")
    if reached_only and ini_path is None:
        raise UserError(
            "--reached-only needs --ini and --source: Moses decodes the new hypotheses to tell which it can produce"
        )
    if source_path == "-" and "-" in stdin:
        raise UserError("'-' (stdin) given for --source and a list: give one of them as a file")
    with contextlib.ExitStack() as stack:
        lm = reach = None
        if lm_path is not None:
            query = find_moses(moses_dir, needs=("bin/query",)).path("bin/query")
            lm = stack.enter_context(KenLMSentences(query, lm_path))
        if ini_path is not None and source_path is not None:
            reach = ConstrainedDecoder(
                find_moses(moses_dir),
                ini_path,
                read_source_text(source_path),
                threads=threads,
                on_progress=lambda m: say(ctx, m),
            )
        summary = merge(
            moses_path,
            out_path,
            added,
            lm=lm,
            lm_feature=lm_feature,
            reach=reach,
            reached_only=reached_only,
            moses_nbest=moses_nbest,
            on_warning=warn,
        )
    left_out = [f"{summary.moses_repeats:,} repeated lines"] if summary.moses_repeats else []
    if moses_nbest is not None:
        left_out.append(f"{summary.moses_cut:,} after the first {moses_nbest:,} of a sentence")
    repeats = f" ({' and '.join(left_out)} left out)" if left_out else ""
    say(
        ctx,
        f"{moses_path}: {summary.sentences:,} sentences, {summary.moses:,} Moses hypotheses{repeats}; "
        + "; ".join(
            f"{path} ({added_indicator(i)}): {summary.added[i]:,} candidates, {summary.shared[i]:,} in Moses' list, "
            f"{summary.new[i]:,} new"
            for i, path in enumerate(added)
        )
        + f"; {summary.lines:,} lines written to {out_path} in {summary.seconds:.1f} s; "
        + (
            f"{summary.reached:,} of {sum(summary.new):,} new hypotheses produced by constrained decoding, with "
            f"Moses' own features, {summary.unreached_left_out:,} left out (--reached-only)"
            if reached_only
            else "new lines' "
            + (f"{', '.join(summary.computed)} computed, " if summary.computed else "")
            + f"{', '.join(summary.zeroed) or 'no other feature'} 0"
            + (
                f" where Moses cannot produce them; {summary.reached:,} of {sum(summary.new):,} produced by "
                "constrained decoding, with Moses' own features"
                if summary.reached is not None
                else ""
            )
        ),
    )
