"""Tests of the evaluation part (see test/__init__.py)."""
