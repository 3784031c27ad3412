"""Tests of the training part (see test/__init__.py)."""
