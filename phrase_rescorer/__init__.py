"""phrase_rescorer: the RNN Encoder-Decoder phrase-table feature of Cho et al. (2014) for Moses.

Data flows one way through the package:

    phrase_table (Moses lines) -> pairs (unique pairs) -> vocab (shortlists)
    -> batching -> model -> scoring (log p(target|source)) -> moses (number convention, moses.ini)

The command-line interface (``cli``) only parses options and calls these modules.
"""

__version__ = "0.1.0"

#: Public names imported on first use, so that ``import phrase_rescorer`` stays light (no torch).
_LAZY = {
    "rescore_table": "rescoring.engine",
    "RescoreOptions": "rescoring.options",
    "RescoreSummary": "rescoring.options",
    "TableRescorer": "rescoring.engine",
    "WindowScorer": "rescoring.scorers",
    "BatchedScorer": "rescoring.scorers",
    "ReferenceScorer": "rescoring.scorers",
    "patch_moses_ini": "moses.ini",
    "rescore_model_dir": "moses.model_dir",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
