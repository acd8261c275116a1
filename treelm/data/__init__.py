"""Vocabularies, corpora, batching and treebank reading."""
