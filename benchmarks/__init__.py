"""Benchmarks and studies: leaves that measure the package, run from the repository root as
``python -m benchmarks.<name>`` (each module's docstring gives its commands and its results page in docs/results/).

Nothing in ``string_perception`` imports this package; benchmarks import the package and ``benchmarks.common``
(code two or more benchmarks share), never a test helper. Not installed with the package (setup.py excludes it).
"""
