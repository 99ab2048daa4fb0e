"""``nbest``: sentence-level features (the CSLM, translation networks) appended to a Moses n-best list."""

from __future__ import annotations

import click

from . import cli
from .common import UserError, device_option, progress, resolve_device, say, threads_option, warn


@cli.command("nbest")
@click.argument("in_path", metavar="IN", type=click.Path(allow_dash=True, readable=False))
@click.argument("out_path", metavar="OUT", type=click.Path(allow_dash=True, readable=False))
@click.option(
    "-m",
    "--model",
    "model_paths",
    required=True,
    multiple=True,
    type=click.Path(),
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
    shortlist.

    \b
    Example (then rerank-tune and rerank):
      moses -f moses.ini -i dev.en -n-best-list dev.nbest 200 distinct > /dev/null
      phrase-rescorer nbest dev.nbest dev.scored.nbest -m cslm.pt -m nmt.pt --source dev.en
    """
    from ..model.files import CheckpointError
    from ..moses.nbest import check_feature_name
    from ..nbest.features import CSLMFeature, load_feature, read_source_text
    from ..nbest.stream import append_features

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
    dev = str(resolve_device(device))
    sources = read_source_text(source_path) if source_path else None
    features = []
    counts = {"CSLM": 0, "NMT": 0}
    for i, path in enumerate(model_paths):
        try:
            feature = load_feature(path, names[i] if names else "", sources, dev, on_warning=warn)
        except ValueError as e:
            if isinstance(e, CheckpointError):
                raise
            raise UserError(str(e)) from e
        if not names:
            kind = "CSLM" if isinstance(feature, CSLMFeature) else "NMT"
            feature.name, counts[kind] = f"{kind}{counts[kind]}", counts[kind] + 1
        features.append(feature)
    with progress(ctx, "nbest", " lines") as bar:
        summary = append_features(
            in_path,
            out_path,
            features,
            sources=sources,
            source_path=source_path or "",
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
            f"{summary.unknown[f.name]:,} of {summary.words:,} words outside the shortlist of {f.name}"
            for f in features
        ),
    )
