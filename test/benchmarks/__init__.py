"""Tests of the benchmarks part (see test/__init__.py)."""
