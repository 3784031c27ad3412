"""Tests of the model part (see test/__init__.py)."""
