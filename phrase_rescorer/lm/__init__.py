"""The paper's second network: the CSLM, a feed-forward n-gram language model of the target
language (Schwenk 2007), trained on tokenized text and used to score n-best lists.

``network`` the model and its sizes; ``text`` sentences to n-grams and the shortlist;
``lm_file`` the model file; ``task`` its text prepared and its task of the training loop;
``scoring`` log p of whole sentences, each distinct context computed once; ``kenlm`` the same
held-out perplexity from the user's KenLM model through Moses' ``bin/query``.
"""
