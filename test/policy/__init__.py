"""Tests of the policy part (see test/__init__.py)."""
