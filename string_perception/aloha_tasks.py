"""The names of the ALOHA tasks the package simulates, scripts and ships controllers for.

One MuJoCo-free place for them, so that argument parsers and launch files (which must not load the simulator just to
list their choices) and the modules that implement the tasks read the same names. Each name's scene, demonstrator
and success rule live in ``sim/demos/tasks.py``, which checks its registry against this list.
"""
from __future__ import annotations

__all__ = ['ALOHA_TASK_NAMES', 'DEFAULT_ALOHA_TASK', 'LEGACY_TASK']

ALOHA_TASK_NAMES = ('transfer_cube', 'insertion')   # gym-aloha's transfer-cube and insertion tasks
DEFAULT_ALOHA_TASK = 'transfer_cube'                # what --task, the launch files and the configs default to
# The task of a demo, checkpoint or probe file written before files recorded their task (transfer-cube was the only
# one then): what readers assume when a file has no task key. Not a default: it must not change with the one above.
LEGACY_TASK = 'transfer_cube'
