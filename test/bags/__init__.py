"""Tests of the bags part (see test/__init__.py)."""
