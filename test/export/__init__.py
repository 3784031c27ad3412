"""Tests of the export part (see test/__init__.py)."""
