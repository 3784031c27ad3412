"""The node's per-stage latency budget, from a frame's header stamp to the publish of each output (ROS-free).

One :class:`FrameTiming` travels with each synchronised frame (executor thread -> worker thread) and collects
milliseconds per stage; :class:`LatencyBudget` keeps counters and a sliding window per stage (p50/p99/mean,
thread-safe) for ``/diagnostics``; :class:`ArrivalBook` remembers when each colour image reached its callback
(keyed by stamp) so the synchroniser's wait can be split from the transport. :class:`StageLog` appends every
frame's record as one JSON line (the benchmark's whole-run percentiles).

Stages (:data:`STAGES`, in frame order; a stage a frame does not go through is not recorded for it):

- ``transport``: header stamp -> the colour image's subscription callback (publisher, DDS, deserialisation);
- ``sync_wait``: colour image callback -> the synchroniser's callback (waiting for depth / camera_info);
- ``queue_wait``: synchroniser callback -> the worker takes the frame;
- ``decode``: messages -> numpy arrays; ``preprocess``, ``inference``, ``postprocess`` and any further stage the
  pipeline times (e.g. ``tracking``): from ``PipelineResult.timings`` (``<stage>_ms``);
- ``tf``: moving the boxes to ``target_frame``;
- ``publish_<output>``: build + publish of detections, markers, embedding, tokens, debug_image.

Totals (:data:`TOTALS`): ``stamp_to_detections`` (stamp -> detections published) and ``stamp_to_done`` (stamp ->
the last output published). Stamp-relative stages use the node clock; in-worker stages ``time.perf_counter``.
"""
from __future__ import annotations

import json
import threading
import time
from collections import Counter, OrderedDict, deque
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping

import numpy as np

__all__ = ['STAGES', 'OUTPUTS', 'TOTALS', 'FrameTiming', 'LatencyBudget', 'ArrivalBook', 'StageLog',
           'pipeline_stages']

OUTPUTS = ('detections', 'markers', 'embedding', 'tokens', 'debug_image')
STAGES = ('transport', 'sync_wait', 'queue_wait', 'decode', 'preprocess', 'inference', 'postprocess', 'tracking',
          'tf', *(f'publish_{o}' for o in OUTPUTS))
TOTALS = ('stamp_to_detections', 'stamp_to_done')
_NS_PER_MS = 1e6


def pipeline_stages(timings: Mapping[str, float]) -> dict[str, float]:
    """``PipelineResult.timings`` -> {stage: ms}: every ``<stage>_ms`` except ``total_ms``."""
    return {k[:-3]: float(v) for k, v in timings.items() if k.endswith('_ms') and k != 'total_ms'}


class FrameTiming:
    """Milliseconds per stage for one frame. ``now_ns`` is the clock the header stamps use (the node clock)."""

    def __init__(self, stamp_ns: int, arrival_ns: int | None, synced_ns: int, now_ns: Callable[[], int]):
        self.stamp_ns, self._now_ns = int(stamp_ns), now_ns
        arrival = synced_ns if arrival_ns is None else min(int(arrival_ns), synced_ns)
        self.ms: dict[str, float] = {'transport': (arrival - self.stamp_ns) / _NS_PER_MS,
                                     'sync_wait': (synced_ns - arrival) / _NS_PER_MS}
        self._synced_ns = synced_ns

    def started(self) -> None:
        """The worker took the frame."""
        self.ms['queue_wait'] = (self._now_ns() - self._synced_ns) / _NS_PER_MS

    def add(self, stage: str, ms: float) -> None:
        self.ms[stage] = self.ms.get(stage, 0.0) + float(ms)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """``with timing.stage('decode'):`` adds the block's wall time to ``name`` (also when it raises)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, (time.perf_counter() - t0) * 1e3)

    def mark(self, total: str) -> float:
        """Record ``total`` (one of :data:`TOTALS`) as now - stamp; returns it in ms."""
        self.ms[total] = (self._now_ns() - self.stamp_ns) / _NS_PER_MS
        return self.ms[total]


class LatencyBudget:
    """Per stage: frames measured, mean over all of them, p50/p99 over the last ``window`` (thread-safe)."""

    def __init__(self, window: int = 600):
        self._lock = threading.Lock()
        self._window = int(window)
        self._values: dict[str, deque] = {}
        self._count: dict[str, int] = {}
        self._sum: dict[str, float] = {}
        self.frames = 0
        self.skips: Counter[str] = Counter()     # output -> frames it was not built for (nobody subscribed)

    def skipped(self, output: str) -> None:
        with self._lock:
            self.skips[output] += 1

    def record(self, ms: Mapping[str, float]) -> None:
        with self._lock:
            self.frames += 1
            for stage, v in ms.items():
                if stage not in self._values:
                    self._values[stage] = deque(maxlen=self._window)
                    self._count[stage], self._sum[stage] = 0, 0.0
                self._values[stage].append(float(v))
                self._count[stage] += 1
                self._sum[stage] += float(v)

    def snapshot(self) -> dict[str, dict[str, float]]:
        """{stage: {count, mean, p50, p99, share}} for every stage in :data:`STAGES` + :data:`TOTALS` (count 0 and
        NaN figures for one no frame went through) plus any other stage seen; ``share`` = mean / mean stamp_to_done."""
        with self._lock:
            windows = {k: np.asarray(v, np.float64) for k, v in self._values.items()}
            count, total = dict(self._count), dict(self._sum)
        done_mean = total.get('stamp_to_done', 0.0) / count['stamp_to_done'] if count.get('stamp_to_done') else 0.0
        out = {}
        for stage in (*STAGES, *TOTALS, *sorted(set(windows) - set(STAGES) - set(TOTALS))):
            w, n = windows.get(stage), count.get(stage, 0)
            if not n:
                out[stage] = {'count': 0, 'mean': float('nan'), 'p50': float('nan'), 'p99': float('nan'),
                              'share': float('nan')}
                continue
            mean = total[stage] / n
            out[stage] = {'count': n, 'mean': mean, 'p50': float(np.percentile(w, 50)),
                          'p99': float(np.percentile(w, 99)), 'share': mean / done_mean if done_mean else float('nan')}
        return out

    def diagnostic_values(self) -> dict[str, float | int]:
        """Flat ``{'<stage>.p50_ms': .., '<stage>.p99_ms': .., '<stage>.mean_ms': .., '<stage>.count': ..}``."""
        flat: dict[str, float | int] = {}
        for stage, f in self.snapshot().items():
            flat[f'{stage}.count'] = int(f['count'])
            for k in ('p50', 'p99', 'mean'):
                flat[f'{stage}.{k}_ms'] = f[k]
        return flat


class ArrivalBook:
    """When each colour image reached the node (node-clock ns), keyed by its stamp; keeps the newest ``size``."""

    def __init__(self, size: int = 64):
        self._lock = threading.Lock()
        self._size = int(size)
        self._book: OrderedDict[int, int] = OrderedDict()

    def arrived(self, stamp_ns: int, now_ns: int) -> None:
        with self._lock:
            self._book[int(stamp_ns)] = int(now_ns)
            while len(self._book) > self._size:
                self._book.popitem(last=False)

    def take(self, stamp_ns: int) -> int | None:
        with self._lock:
            return self._book.pop(int(stamp_ns), None)


class StageLog:
    """One JSON object per frame (``{'stamp_ns': .., '<stage>': ms, ...}``) appended to ``path``; thread-safe."""

    def __init__(self, path: str):
        self._lock = threading.Lock()
        self._file: Any = open(path, 'a', buffering=1 << 16)

    def write(self, stamp_ns: int, ms: Mapping[str, float]) -> None:
        line = json.dumps({'stamp_ns': int(stamp_ns), **{k: round(v, 4) for k, v in ms.items()}})
        with self._lock:
            if self._file is not None:
                self._file.write(line + '\n')

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    @staticmethod
    def read(path: str) -> list[dict[str, float]]:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
