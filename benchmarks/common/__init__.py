"""Code that two or more benchmarks (and their tests) share: benchmark logic only, product logic lives in
``string_perception``."""
