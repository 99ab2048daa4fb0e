"""n-best reranking: the weights of every feature (Moses' and the added ones) tuned on the dev
set's n-best lists with Moses' own MERT, applied to other n-best lists.

``nbest_features`` the dense feature matrix of a list; ``weights`` the weights file; ``mert``
tuning with ``bin/extractor`` and ``bin/mert``; ``choose`` the best hypothesis of each sentence;
``tune`` the tuning on the dev list that ``rerank-tune`` and ``experiment`` run; ``merge``
other systems' candidates merged into Moses' list (``merge-nbest``); ``origins`` where the
chosen hypotheses of a merged list come from.
"""
