"""Tests of the ros part (see test/__init__.py)."""
