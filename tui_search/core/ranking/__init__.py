"""Ranking: a query plan resolved against the index, the arms fused, signals applied, re-ranked."""
