"""Tests of the scenes part (see test/__init__.py)."""
