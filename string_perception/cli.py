"""Option parsers the package's command-line tools share (torch-free, so any CLI module may import it).

``parse_kv`` is the ``type=`` of every repeatable ``--model`` / ``--scene`` / ``--sim`` / ``--loss`` / ``--matcher``
``KEY=VALUE`` option (``string-perception-train``, ``string-perception-eval-checkpoint``, the bag evaluator).
``parse_seed_range`` reads the ``FIRST:END`` seed ranges of the localiser trainer and the policy benchmarks.
"""
from __future__ import annotations

import argparse
import json
from typing import Any


def parse_kv(text: str) -> tuple[str, Any]:
    """Parse a ``KEY=VALUE`` command-line option (argparse ``type=``) -> ``(KEY, value)``: VALUE as JSON when it
    parses (numbers, lists, objects, true/false), else the plain string. Raises ``argparse.ArgumentTypeError``
    without ``=``."""
    if '=' not in text:
        raise argparse.ArgumentTypeError(f'expected KEY=VALUE, got {text!r}')
    k, v = text.split('=', 1)
    try:
        return k, json.loads(v)
    except json.JSONDecodeError:
        return k, v


def parse_seed_range(text: str) -> range:
    """``'FIRST:END'`` -> ``range(FIRST, END)`` (END excluded); ``ValueError`` for anything else."""
    a, b = (int(x) for x in text.split(':'))
    return range(a, b)


__all__ = ['parse_kv', 'parse_seed_range']
