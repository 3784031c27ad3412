"""Transforms to ``target_frame`` that never stall the input callback (tf2_ros, only where it is importable).

tf2_ros' ``TransformListener(buffer, node)`` subscribes ``/tf`` and ``/tf_static`` on the node it is given, so the
node's executor delivers them. While the synchroniser callback runs the pipeline (``inline_processing``, one
executor thread) no transform can arrive, and ``Buffer.lookup_transform(..., timeout)`` polls the buffer in 20 ms
sleeps for a transform that cannot come: every miss cost the whole timeout. :class:`TfLookup` therefore

- gives the listener a small node of its own (``<node name>_tf_listener`` in the node's namespace and context, no
  global ``--ros-args``, which would rename it to the node's own name) spun by an executor in its own thread, so
  the buffer fills whatever the node's executor is doing (tf2_ros' ``spin_thread=True`` on the node itself would
  move that node to the listener's executor);
- looks up the transform at the image stamp waiting ``wait_s`` (``tf_timeout``; 0, the default, never waits): a
  transform that is not in the buffer yet is a miss, counted in :attr:`TfLookup.misses`, and the caller drops the
  frame (``drops.tf``).

:func:`string_perception.node_params.import_tf2` is the one check of what this needs from tf2_ros (``Buffer``,
``TransformListener``, ``TransformException``); ``node_params.tf2_available`` asks it, so ``target_frame`` is
accepted exactly when this works.
"""
from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..box_ops import quaternion_to_rotation
from ..node_params import import_tf2

__all__ = ['TfLookup']

class TfLookup:
    """``TfLookup(node)``: a tf2 buffer filled by a listener with its own node and thread; :meth:`lookup` returns
    ``(R[3,3], t[3])`` taking points from a frame to another at a stamp, or None after counting a miss.
    ``tf2``: the tf2_ros module (default :func:`import_tf2`). :meth:`close` stops the thread and the node."""

    def __init__(self, node, *, wait_s: float = 0.0, tf2=None) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        self._tf2 = import_tf2() if tf2 is None else tf2
        self.wait_s = float(wait_s)
        self.misses = 0
        self.last_error = ''
        self.buffer = self._tf2.Buffer()
        self.listener_node = rclpy.create_node(f'{node.get_name()}_tf_listener', namespace=node.get_namespace(),
                                               context=node.context, use_global_arguments=False,
                                               start_parameter_services=False)
        self.listener = self._tf2.TransformListener(self.buffer, self.listener_node)
        self._executor = SingleThreadedExecutor(context=node.context)
        self._executor.add_node(self.listener_node)
        self._thread = threading.Thread(target=self._spin, name='tf_listener', daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException
        try:
            self._executor.spin()
        except ExternalShutdownException:        # the context shut down (Ctrl-C): nothing left to listen to
            pass

    def lookup(self, target: str, source: str, stamp: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """The transform ``source -> target`` at ``stamp`` (builtin_interfaces/Time), waiting at most ``wait_s``;
        None when the buffer cannot give it (miss counted, reason in :attr:`last_error`)."""
        from rclpy.duration import Duration
        from rclpy.time import Time
        try:
            tf = self.buffer.lookup_transform(target, source, Time.from_msg(stamp),
                                              timeout=Duration(seconds=self.wait_s))
        except self._tf2.TransformException as e:     # Lookup / Extrapolation / Connectivity / Timeout ...
            self.misses += 1
            self.last_error = str(e) or type(e).__name__
            return None
        q, t = tf.transform.rotation, tf.transform.translation
        return quaternion_to_rotation(np.array([q.x, q.y, q.z, q.w])), np.array([t.x, t.y, t.z])

    def close(self) -> None:
        """Unsubscribe, stop the listener thread, destroy the listener node (idempotent)."""
        if self._thread is None:
            return
        self.listener.unregister()
        self._executor.shutdown()
        self._thread.join(timeout=5.0)
        self._thread = None
        self.listener_node.destroy_node()
