"""``python -m phrase_rescorer`` is the ``phrase-rescorer`` command."""

from .entry import main

main()
