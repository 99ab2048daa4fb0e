"""Whole sentences scored by the networks and the CSLM: one feature object per model file
(``features``), appended to every line of a Moses n-best list as it streams (``nbest``), ln p of
every line of a text or sentence pair (``sentences``, the ``score`` command), and the same from
Python (``api``: ``phrase_rescorer.load(path).score(...)``)."""
