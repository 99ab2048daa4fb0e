"""``phrase-rescorer experiment``: does the RNN column help a Moses system? The MERT A/B.

Modules, in the order data flows: :mod:`.systems` (checks, the systems' starting moses.ini files,
the rescored tables), :mod:`.moses_runs` (mert-moses.pl and the decoder), :mod:`.bleu`
(sacrebleu scores, tokenized and detokenized, with per-sentence statistics),
:mod:`.significance` (approximate randomization and paired bootstrap over sentences and runs),
:mod:`.report` (JSON and the table), :mod:`.runner` (the whole experiment, resumable).
"""

from .runner import run_experiment
from .settings import Settings
from .systems import ExperimentError

__all__ = ["ExperimentError", "Settings", "run_experiment"]
