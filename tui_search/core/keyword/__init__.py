"""The keyword arm: the Whoosh full-text index, its analysis, query building and BM25F."""
