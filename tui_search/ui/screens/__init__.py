"""Modal screens."""
