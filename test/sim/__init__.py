"""Tests of the sim part (see test/__init__.py)."""
