"""Tests of the core part (see test/__init__.py)."""
