"""Tests of the codec part (see test/__init__.py)."""
