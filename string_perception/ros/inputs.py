"""The perception node's input subscriptions: which topic, message type, QoS and reader for each input.

:func:`input_specs` names the three inputs the synchroniser pairs, ``(name, message type, topic)`` in
:data:`input_monitor.INPUT_NAMES` order: ``image`` (``image/compressed`` with ``image_transport:=compressed``),
``depth`` (sensor_msgs/CompressedImage on ``depth/compressedDepth`` with ``depth_transport:=compressedDepth``) and
``camera_info``. :func:`subscribe_inputs` subscribes them, each with its ``<input>_qos_reliability`` /
``<input>_qos_depth`` profile, in the node's input callback group, and reports every message to an
:class:`input_monitor.InputMonitor` before the synchroniser takes it:

- compressed colour: decoded Images from image_transport_py when importable, else ours (``compressed_input``);
- raw images with ``raw_image_input``: serialized bytes read by ``image_cdr`` into views (``raw_input``);
- otherwise rclpy's deserialised messages (``sequence_gaps.SequencedSubscriber``).

The colour input reports its MessageInfo (publication sequence numbers: ``drops.not_received``).
"""
from __future__ import annotations

from typing import Any, Mapping

from sensor_msgs.msg import CameraInfo, CompressedImage, Image

from .compressed_input import make_compressed_input
from .input_monitor import InputMonitor
from ..qos import qos_profile
from .raw_input import RawImageSubscriber
from .sequence_gaps import SequencedSubscriber

__all__ = ['input_specs', 'subscribe_inputs']


def input_specs(node, cfg: Mapping[str, Any]) -> list[tuple[str, type, str]]:
    """``[(input name, message type, topic)]`` for ``node`` (packed transports: the resolved base topic + suffix,
    as image_transport names them)."""
    compressed = cfg['image_transport'] == 'compressed'
    image_topic = node.resolve_topic_name('image') + '/compressed' if compressed else 'image'
    depth_packed = cfg['depth_transport'] == 'compressedDepth'
    depth_topic = node.resolve_topic_name('depth') + '/compressedDepth' if depth_packed else 'depth'
    return [('image', Image, image_topic),     # compressed: decoded by compressed_input (image_transport's contract)
            ('depth', CompressedImage if depth_packed else Image, depth_topic),
            ('camera_info', CameraInfo, 'camera_info')]


def subscribe_inputs(node, cfg: Mapping[str, Any], specs: list[tuple[str, type, str]], monitor: InputMonitor,
                     callback_group) -> tuple[list[Any], str]:
    """Subscribe ``specs`` (:func:`input_specs`) on ``node``: ``(subscribers, what delivers colour images)``, the
    latter ``'image_cdr'``, ``'rclpy'`` or the compressed input's implementation. Each subscriber is a message
    filter source for the synchroniser."""
    image_input = 'image_cdr' if cfg['raw_image_input'] else 'rclpy'
    subs = []
    for name, msg_type, topic in specs:
        qos = qos_profile(cfg[f'{name}_qos_reliability'], cfg[f'{name}_qos_depth'])
        # colour frames the node never received (overwritten in the QoS queue, lost in transport) are counted
        # from the publisher's sequence numbers as drops.not_received
        on_info = monitor.missed if name == 'image' else None
        if name == 'image' and cfg['image_transport'] == 'compressed':   # image_transport_py, else ours: Images
            sub = make_compressed_input(node, node.resolve_topic_name('image'), qos, cfg[f'{name}_qos_depth'],
                                        callback_group=callback_group, on_bad=monitor.bad_compressed,
                                        on_info=on_info, on_bad_stamp=monitor.bad_stamp)
            image_input = sub.implementation
        elif cfg['raw_image_input'] and msg_type is Image:      # serialized bytes read by image_cdr (views)
            sub = RawImageSubscriber(node, msg_type, topic, qos_profile=qos, callback_group=callback_group,
                                     on_bad=monitor.bad_cdr, on_info=on_info, on_bad_stamp=monitor.bad_stamp)
        else:
            sub = SequencedSubscriber(node, msg_type, topic, callback_group=callback_group, qos_profile=qos,
                                      on_info=on_info, on_bad_stamp=monitor.bad_stamp)
        sub.registerCallback(lambda msg, n=name: monitor.arrived(n, msg))
        subs.append(sub)
    return subs, image_input
