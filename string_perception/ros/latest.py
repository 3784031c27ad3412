"""Latest-frame-wins hand-off from the executor thread to one worker thread (ROS-free).

The synchroniser callback (executor thread) only calls :meth:`LatestWorker.submit`; the worker thread runs
``process(item)`` on the newest item. An item still waiting when a newer one arrives is replaced and reported
to ``on_drop`` (the node counts it as a ``stale`` drop), so a slow model never builds a queue of old frames.
Exceptions from ``process`` go to ``on_error`` and the worker carries on with the next item.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

__all__ = ['LatestWorker']

_EMPTY = object()


class LatestWorker:
    """``LatestWorker(process, on_drop=None, on_error=None, name=...)``; ``start()``, ``submit(item)``, ``stop()``."""

    def __init__(self, process: Callable[[Any], None], on_drop: Callable[[Any], None] | None = None,
                 on_error: Callable[[BaseException], None] | None = None, name: str = 'string_perception_worker'):
        self._process, self._on_drop, self._on_error = process, on_drop, on_error
        self._cond = threading.Condition()
        self._item: Any = _EMPTY
        self._running = False
        self._busy = False
        self._thread: threading.Thread | None = None
        self._name = name

    def start(self) -> None:
        with self._cond:
            if self._running:
                return
            self._running = True
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()

    def submit(self, item: Any) -> bool:
        """Hand over ``item``; returns False (and calls ``on_drop(old)``) if it replaced a waiting item."""
        with self._cond:
            old, self._item = self._item, item
            self._cond.notify()
        if old is not _EMPTY:
            if self._on_drop is not None:
                self._on_drop(old)
            return False
        return True

    def idle(self) -> bool:
        """Nothing waiting and nothing being processed."""
        with self._cond:
            return self._item is _EMPTY and not self._busy

    def stop(self, timeout: float = 5.0) -> None:
        """Finish the item in progress (not the waiting one, which is dropped silently) and join the thread."""
        with self._cond:
            self._running = False
            self._item = _EMPTY
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._thread = None

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._running and self._item is _EMPTY:
                    self._cond.wait()
                if not self._running:
                    return
                item, self._item = self._item, _EMPTY
                self._busy = True
            try:
                self._process(item)
            except BaseException as e:  # noqa: BLE001 - the worker must survive any frame
                if self._on_error is not None:
                    self._on_error(e)
            finally:
                with self._cond:
                    self._busy = False
