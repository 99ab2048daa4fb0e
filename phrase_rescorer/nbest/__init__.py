"""Sentence-level features of Moses n-best lists: the CSLM's log p(hypothesis) and a translation
network's log p(hypothesis | source sentence), appended to every line of a list as it streams
(``stream``), one feature per model (``features``)."""
