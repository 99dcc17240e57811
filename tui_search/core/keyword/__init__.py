"""The keyword arm: the Whoosh full-text index, its analysis, query building and BM25F.

- ``analysis``: text into terms (identifiers, compound words, stems, question words).
- ``schema``: the index's fields and a chunk's field values.
- ``compile``: plain text and query trees into Whoosh queries.
- ``index``: the index (``LexicalIndex``): opening, writing, the searchers it lends.
- ``snapshot``: one searcher's read view (``LexicalSnapshot``): filter masks, BM25F search.
- ``bm25``: BM25F over postings decoded into arrays; ``segcache``: those arrays on disk.
- ``files``: the index's files as memory maps; ``writing``: the multi-process writer.
"""
