"""Fixtures for the SVG snapshots (anyio runs nothing here: snap_compare drives the app)."""
