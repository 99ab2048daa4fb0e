"""``python -m phrase_rescorer`` is the ``phrase-rescorer`` command."""

from .cli import main

main()
