"""Tests of the docs part (see test/__init__.py)."""
