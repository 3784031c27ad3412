"""Writing a study's report directory: the markdown table, the collected records and (optionally) a plot.

The ALOHA studies (``aloha_encoding_study``, ``aloha_finetune_study``, ``aloha_encoding_level``) each end their
``report`` command the same way; this is that ending.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Sequence


def write_study_report(out: str | Path, lines: Sequence[str], records: Any, records_file: str,
                       plot: Callable[[Path], None] | None = None) -> int:
    """``out``/table.md (``lines``), ``out``/``records_file`` (``records`` as JSON) and, with ``plot``,
    ``plot(out / 'success_vs_step.png')``; prints the table; returns 0 (the command's exit code)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / 'table.md').write_text('\n'.join(lines) + '\n')
    (out / records_file).write_text(json.dumps(records, indent=1))
    if plot is not None:
        plot(out / 'success_vs_step.png')
    print('\n'.join(lines))
    return 0
