"""phrase_rescorer: the RNN Encoder-Decoder phrase-table feature of Cho et al. (2014) for Moses.

Data flows one way through the package:

    phrase_table (Moses lines) -> pairs (unique pairs) -> vocab (shortlists)
    -> batching -> model -> scoring (log p(f|e)) -> moses (number convention, moses.ini)

The command-line interface (``cli``) only parses options and calls these modules.
"""

__version__ = "0.1.0"
