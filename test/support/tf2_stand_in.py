"""A stand-in for tf2_ros (absent on PyPI set-ups) with upstream's signatures, for tests of ros/tf_lookup.py and of
the node's target_frame path. ``FakeTf2().module`` is the module; ``.buffer`` / ``.listener`` the last created."""
import time
import types


class FakeTf2:
    """A stand-in for tf2_ros with upstream's signatures (geometry2 jazzy tf2_ros_py): ``Buffer(cache_time=None,
    node=None)``, ``lookup_transform(target, source, time, timeout=Duration())`` polling in 20 ms sleeps while
    the timeout lasts (as ``Buffer.can_transform``), ``TransformListener(buffer, node, *, spin_thread=False,
    qos=None, static_qos=None)`` subscribing /tf on the node it is given, ``unregister()``."""

    def __init__(self):
        fake = self

        class TransformException(Exception):
            pass

        class Buffer:
            def __init__(self, cache_time=None, node=None):
                self.transforms, self.timeouts = {}, []
                fake.buffer = self

            def set_transform(self, transform, authority):
                self.transforms[(transform.header.frame_id, transform.child_frame_id)] = transform

            def lookup_transform(self, target_frame, source_frame, time, timeout=None):
                from rclpy.duration import Duration
                timeout = Duration() if timeout is None else timeout
                self.timeouts.append(timeout.nanoseconds)
                end = time_mod.monotonic() + timeout.nanoseconds * 1e-9
                while (target_frame, source_frame) not in self.transforms and time_mod.monotonic() < end:
                    time_mod.sleep(0.02)
                if (target_frame, source_frame) not in self.transforms:
                    raise TransformException(f'"{target_frame}" passed to lookupTransform does not exist')
                return self.transforms[(target_frame, source_frame)]

        class TransformListener:
            def __init__(self, buffer, node, *, spin_thread=False, qos=None, static_qos=None):
                from tf2_msgs.msg import TFMessage
                self.node, self.spin_thread = node, spin_thread
                self.sub = node.create_subscription(TFMessage, '/tf', self.callback, 100 if qos is None else qos)
                fake.listener = self

            def callback(self, msg):
                for tf in msg.transforms:
                    fake.buffer.set_transform(tf, 'default_authority')

            def unregister(self):
                self.node.destroy_subscription(self.sub)

        time_mod = time
        self.module = types.ModuleType('tf2_ros')
        self.module.Buffer, self.module.TransformListener = Buffer, TransformListener
        self.module.TransformException = TransformException
