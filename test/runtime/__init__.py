"""Tests of the runtime part (see test/__init__.py)."""
