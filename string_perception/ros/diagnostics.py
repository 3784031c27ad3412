"""Run-time statistics of the node and their /diagnostics message.

:class:`NodeStats` (ROS-free, thread-safe) counts what happens: messages per input topic, synchronised frames,
processed frames, drops by reason (``stale``: replaced by a newer frame before the worker took it;
``unsynchronised``: colour images that never got a depth + camera_info partner; ``tf``: no transform to
target_frame; ``not_received``: colour images the publisher sent that never reached the node, overwritten in the
subscription's QoS queue while a frame was processed or lost in transport, from the publication sequence numbers),
bad inputs by kind (the runtime's ``InputError.kind``, plus ``conversion``), inference errors by kind, and
latencies (image stamp -> publish, and inference alone) over a sliding window. :meth:`NodeStats.snapshot` gives
rates since the previous snapshot and p50/p95 over the window; :func:`diagnostic_array` turns a snapshot into a
diagnostic_msgs/DiagnosticArray (the node publishes one per ``diagnostics_period``, 1 Hz by default).

The counters are totals since configure; the status **level** looks only at a recent window (``level_window_s``,
the node uses :data:`LEVEL_WINDOW_PERIODS` diagnostics periods, as diagnostic_updater's frequency / time-stamp
checks judge their last few periods): one bad frame makes it WARN and one inference error ERROR until the window
has passed without another, then it is OK again while the totals keep counting (``recent_errors.<kind>``,
``recent_bad_inputs.<kind>`` carry the window's counts). The status is named ``<node name>: pipeline``, the name
diagnostic_updater gives a task of a node (:func:`status_name`), so several nodes (multi_camera.launch.py) publish
distinct statuses.
"""
from __future__ import annotations

import threading
import time
from collections import Counter, deque
from typing import Any, Mapping

import numpy as np

__all__ = ['NodeStats', 'diagnostic_array', 'status_name', 'TASK_NAME', 'DROP_REASONS', 'LEVEL_WINDOW_PERIODS']

TASK_NAME = 'pipeline'
DROP_REASONS = ('stale', 'unsynchronised', 'tf', 'not_received')
LEVEL_WINDOW_PERIODS = 5          # the level judges the last 5 diagnostics periods


def status_name(node_name: str, task: str = TASK_NAME) -> str:
    """``'<node name>: <task>'``, as ``diagnostic_updater.Updater`` names a task's status (its default, without
    ``use_fqn``: the node's name, not its namespace), e.g. ``status_name('string_perception_cam0')``."""
    return f'{node_name}: {task}'


def _pct(values, q: float) -> float:
    return float(np.percentile(np.asarray(values, np.float64), q)) if len(values) else float('nan')


class NodeStats:
    """Counters + latency windows; every method may be called from any thread."""

    def __init__(self, window: int = 300, clock=time.monotonic, level_window_s: float = 5.0):
        self._lock = threading.Lock()
        self._clock = clock
        self.level_window_s = float(level_window_s)
        self.inputs: Counter[str] = Counter()          # topic -> messages received
        self.synced = 0
        self.processed = 0
        self.published = 0
        self.drops: Counter[str] = Counter({r: 0 for r in DROP_REASONS})
        self.bad_inputs: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.warnings: Counter[str] = Counter()
        self._latency = deque(maxlen=window)            # ms, image stamp -> publish
        self._inference = deque(maxlen=window)          # ms, model run only
        self._last_t = clock()
        self._last_counts = (Counter(), 0, 0)
        # (time, errors, bad inputs) at each snapshot, oldest first: the window's counts are now minus the newest
        # entry at least level_window_s old (or the configure-time zeros while none is that old)
        self._history: deque[tuple[float, Counter, Counter]] = deque([(self._last_t, Counter(), Counter())])

    # ---------------------------------------------------------------- counting
    def count_input(self, topic: str) -> None:
        with self._lock:
            self.inputs[topic] += 1

    def count_synced(self) -> None:
        with self._lock:
            self.synced += 1

    def drop(self, reason: str, n: int = 1) -> None:
        with self._lock:
            self.drops[reason] += n

    def bad_input(self, kind: str) -> None:
        with self._lock:
            self.bad_inputs[kind] += 1

    def error(self, kind: str) -> None:
        with self._lock:
            self.errors[kind] += 1

    def warning(self, kind: str) -> None:
        with self._lock:
            self.warnings[kind] += 1

    def frame_done(self, latency_ms: float, inference_ms: float) -> None:
        """A frame's outputs were published: ``latency_ms`` from its image stamp, ``inference_ms`` model only."""
        with self._lock:
            self.processed += 1
            self.published += 1
            self._latency.append(float(latency_ms))
            self._inference.append(float(inference_ms))

    # ---------------------------------------------------------------- reading
    def snapshot(self, image_topic: str = 'image') -> dict[str, Any]:
        """Totals, rates (Hz) since the previous snapshot, latency percentiles (ms) over the window."""
        with self._lock:
            now = self._clock()
            dt = max(now - self._last_t, 1e-9)
            last_inputs, last_synced, last_pub = self._last_counts
            rates = {f'input_rate_hz[{k}]': (v - last_inputs.get(k, 0)) / dt for k, v in sorted(self.inputs.items())}
            rates['synced_rate_hz'] = (self.synced - last_synced) / dt
            rates['output_rate_hz'] = (self.published - last_pub) / dt
            self._last_t, self._last_counts = now, (Counter(self.inputs), self.synced, self.published)
            # colour images that never became part of a synchronised triple (the synchroniser keeps a queue,
            # so this lags by up to queue_size frames)
            unsync = max(0, self.inputs.get(image_topic, 0) - self.synced)
            drops = dict(self.drops)
            drops['unsynchronised'] = unsync
            lat, inf = list(self._latency), list(self._inference)
            recent_errors, recent_bad = self._recent(now)
            return {
                'inputs': dict(self.inputs), 'synced': self.synced, 'processed': self.processed,
                'published': self.published, 'drops': drops, 'bad_inputs': dict(self.bad_inputs),
                'errors': dict(self.errors), 'warnings': dict(self.warnings), **rates,
                'latency_ms_p50': _pct(lat, 50), 'latency_ms_p95': _pct(lat, 95),
                'inference_ms_p50': _pct(inf, 50), 'inference_ms_p95': _pct(inf, 95), 'window': len(lat),
                'level_window_s': self.level_window_s, 'recent_errors': recent_errors, 'recent_bad_inputs': recent_bad,
            }

    def _recent(self, now: float) -> tuple[dict[str, int], dict[str, int]]:
        """(errors, bad inputs) counted in the last ``level_window_s`` (kinds with a count only); under the lock."""
        history = self._history
        while len(history) > 1 and history[1][0] <= now - self.level_window_s:
            history.popleft()                 # history[0] stays the newest entry at least a window old
        _, errors0, bad0 = history[0]
        history.append((now, Counter(self.errors), Counter(self.bad_inputs)))
        return (dict(+(self.errors - errors0)), dict(+(self.bad_inputs - bad0)))


def _level_and_message(snap: Mapping[str, Any], active: bool) -> tuple[int, str]:
    """(0 OK | 1 WARN | 2 ERROR, summary) for a snapshot: errors and bad inputs of the recent window only."""
    if not active:
        return 0, 'inactive'
    window = f"in the last {snap['level_window_s']:g} s"

    def counts(kinds: Mapping[str, int]) -> str:
        return ', '.join(f'{k}={v}' for k, v in sorted(kinds.items()))
    if snap['recent_errors']:
        return 2, f"inference errors {window}: {counts(snap['recent_errors'])}"
    if snap['synced'] == 0:
        return 1, 'no synchronised input yet'
    if snap['output_rate_hz'] == 0 and snap['synced_rate_hz'] == 0:
        return 1, 'no input in the last period'
    if snap['recent_bad_inputs']:
        return 1, f"bad inputs {window}: {counts(snap['recent_bad_inputs'])}"
    return 0, f"{snap['output_rate_hz']:.1f} Hz, latency p50 {snap['latency_ms_p50']:.1f} ms"


def diagnostic_array(snap: Mapping[str, Any], stamp: Any, *, node_name: str, hardware_id: str, provider: str,
                     active: bool = True, extra: Mapping[str, Any] | None = None, task: str = TASK_NAME):
    """diagnostic_msgs/DiagnosticArray with one DiagnosticStatus named ``status_name(node_name, task)`` whose
    key/values are the snapshot flattened (``drops.stale``, ``bad_inputs.bad_intrinsics``, ``latency_ms_p95``, ...).
    ``hardware_id``: the node's fully qualified name tells nodes of one name in different namespaces apart."""
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
    level, message = _level_and_message(snap, active)
    st = DiagnosticStatus(level=bytes([level]), name=status_name(node_name, task), message=message,
                          hardware_id=hardware_id)
    values = [('execution_provider', provider)]
    for k, v in snap.items():
        if isinstance(v, Mapping):
            values += [(f'{k}.{kk}', vv) for kk, vv in sorted(v.items())]
        else:
            values.append((k, v))
    values += list((extra or {}).items())
    st.values = [KeyValue(key=str(k), value=(f'{v:.3f}' if isinstance(v, float) else str(v))) for k, v in values]
    arr = DiagnosticArray(status=[st])
    arr.header.stamp = stamp
    return arr
