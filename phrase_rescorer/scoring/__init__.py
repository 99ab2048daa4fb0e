"""``score``: log-probabilities of plain text and of sentence pairs under any trained network."""
