"""What each score column of a phrase table is, in one wording for every message and report.

train-model.perl writes four scores per line. In Moses' notation f is the *source* side and e
the *target* side, and the columns are

    1  p(f|e)    inverse phrase translation probability   = p(source|target)
    2  lex(f|e)  inverse lexical weighting                = lex(source|target)
    3  p(e|f)    direct phrase translation probability    = p(target|source)
    4  lex(e|f)  direct lexical weighting                 = lex(target|source)

(the Moses manual, "Training: Score Phrases"; the bundled system's README.txt lists them as
"p(f|e) lex(f|e) p(e|f) lex(e|f) (here f = English source, e = French target)". The data
agree: over the targets of one source, column 3 sums to 1 and column 1 does not; a test checks
this on the bundled sample.)

The network's column is p(target|source): the *direct* direction, that of column 3, i.e. p(e|f)
in Moses' notation. (The paper writes the same probability p(f|e), with e the source: that
notation is not used in this project's messages, since a Moses user reads p(f|e) as column 1.)
An inverse network (``train --direction inverse``) gives p(source|target), the direction of
column 1. ``rescore -m A -m B`` appends one column per network in the order given, then the
WP count when asked.
"""

from __future__ import annotations

#: The four train-model.perl columns: (name by side, Moses' name).
MOSES_COLUMNS = {
    1: ("p(source|target)", "p(f|e), inverse"),
    2: ("lex(source|target)", "lex(f|e), inverse"),
    3: ("p(target|source)", "p(e|f), direct"),
    4: ("lex(target|source)", "lex(e|f), direct"),
}
#: The columns rescoring appends: a network's, by its direction (its name by side, Moses' name).
DIRECTION_COLUMNS = {
    "forward": ("p(target|source)", "p(e|f), direct"),
    "inverse": ("p(source|target)", "p(f|e), inverse"),
}
RNN_SCORE = "RNN p(target|source)"
RNN_SCORE_MOSES = "p(e|f), direct"
RNN_COUNT = "RNN out-of-shortlist words n, as exp(n)"


def network_column(direction: str) -> str:
    """The name of the column a network of ``direction`` adds, with Moses' name."""
    name, moses = DIRECTION_COLUMNS[direction]
    return f"RNN {name} (Moses' {moses})"


#: The starting weight ``moses-ini`` gives each added column (MERT retunes it). Measured on the
#: bundled sample with a ``small`` network trained 25 minutes on the whole en-fr table
#: (held-out perplexity 8.9): the column's log p has mean -12.1, median -10.4, 10th percentile
#: -23.4 per phrase pair, against -0.5 / -5.0 / -0.5 / -6.2 for the four Moses columns. With
#: the system's tuned weights (0.091 0.0019 0.065 0.041) those four add -0.34 (sd 0.21) per pair
#: in all; weight 0.2 would make the new column add -2.4 (sd 1.6), seven times as much, and the
#: untuned system would translate by the network alone. At 0.02 it adds -0.24 (sd 0.16): as much
#: as the strongest Moses column, lex(target|source), and less than the four together. A weaker
#: network gives larger magnitudes (the 4-minute demo network, perplexity 96: mean -25.0, so
#: -0.50 per pair at 0.02), still of the order of the Moses columns.
#: The one starting weight of an added column next to an ini's own (tuned) weights: moses-ini,
#: moses-step and ``experiment --start-weights ini``. ``experiment``'s default start resets every
#: weight to train-model.perl's (``ini_weights.DEFAULT_WEIGHTS``: 0.2 per phrase-table score, the
#: added columns included), a different starting point with its own scale.
START_WEIGHT = 0.02


def describe(column: int, columns: int | None = None, added: tuple[str, ...] | None = None) -> str:
    """``column`` (1-based) of a table with ``columns`` scores per line: its name, with Moses'
    name where it has one. ``added`` names the appended columns (the last ones), in order: each
    network's direction ("forward", "inverse"), then "wp" for the count column; without it,
    columns 5 and 6 of a 5- or 6-score table are taken to be the ones one forward network
    appends."""
    if added is not None and columns is not None and column > columns - len(added):
        kind = added[column - (columns - len(added)) - 1]
        return RNN_COUNT if kind == "wp" else network_column(kind)
    if column in MOSES_COLUMNS:
        name, moses = MOSES_COLUMNS[column]
        return f"{name} (Moses' {moses})"
    if added is None and columns in (5, 6) and column == 5:
        return f"{RNN_SCORE} (Moses' {RNN_SCORE_MOSES})"
    if added is None and columns == 6 and column == 6:
        return RNN_COUNT
    return "unknown"
