"""A ROS_DOMAIN_ID of this machine's own: an flock on a file in the temp directory per id in 1..MAX_DOMAIN_ID.

Processes that talk over loopback DDS on one machine (the tests, the benchmarks) each take a domain no one else on
the machine holds, so that their participants never discover each other. No ROS import: the id goes into the
child processes' environment (``dds_env.merged_dds_env``) before any of them creates a ROS context.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .dds_env import MAX_DOMAIN_ID

__all__ = ['LOCK_DIR', 'reserved_domain_id']

LOCK_DIR = Path(tempfile.gettempdir())
_RESERVATIONS = itertools.count()   # successive reservations of one process start at successive ids


@contextlib.contextmanager
def reserved_domain_id(first: int | None = None) -> Iterator[int]:
    """Yield a ROS_DOMAIN_ID in 1..101 that no other user of this helper on the machine holds.

    Starts at ``first`` or else at a pid-derived id that moves on with every reservation of this process, and
    probes upward; each id is held with an flock on a file in the temp directory for the duration of the ``with``
    block (released automatically if the process dies). Moving on matters: tests that run one after the other in
    the pytest process would otherwise share one domain, and a participant an earlier test leaves behind (DDS
    deletes them asynchronously) could answer a later test's graph queries by node name. Raises RuntimeError when
    every id is held.
    """
    start = ((os.getpid() + next(_RESERVATIONS)) % MAX_DOMAIN_ID) if first is None else (first - 1)
    for k in range(MAX_DOMAIN_ID):
        dom = 1 + (start + k) % MAX_DOMAIN_ID
        path = LOCK_DIR / f'string_perception_ros_domain_{dom}.lock'
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                continue
            raise
        try:
            yield dom
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        return
    raise RuntimeError('no free ROS_DOMAIN_ID in 1..101 (all held by other tests)')
