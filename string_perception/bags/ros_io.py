"""rclpy helpers shared by the player and the recorder: message classes by type name and QoS choices.
Imports rclpy lazily; the caller has set the DDS environment (``dds_env``) before ``rclpy.init``."""
from __future__ import annotations

import importlib

__all__ = ['message_class', 'publisher_qos', 'adaptive_qos', 'parse_remaps', 'bag_qos', 'playback_qos']

QOS_DEPTH = 10


def message_class(msgtype: str):
    """``'sensor_msgs/msg/Image'`` -> the ROS Python class; ImportError names the missing package."""
    pkg, kind, name = msgtype.split('/')
    try:
        return getattr(importlib.import_module(f'{pkg}.{kind}'), name)
    except (ImportError, AttributeError) as e:
        raise ImportError(f'message type {msgtype} is not importable here ({e})') from e


def publisher_qos(reliability: str = 'reliable', depth: int = QOS_DEPTH):
    """KEEP_LAST ``depth``, volatile; reliable by default (best-effort subscribers, as the node's camera inputs,
    accept it too). The nodes' own profile builder (``string_perception.qos.qos_profile``) with the tools' defaults."""
    from ..qos import qos_profile    # rclpy: imported only when a publisher is made (this module stays rclpy-free)
    return qos_profile(reliability, depth)


def adaptive_qos(publisher_infos, depth: int = 100):
    """A subscription QoS matching every current publisher (as ``ros2 bag record`` picks it): reliable /
    transient-local only when all publishers offer it."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
    infos = list(publisher_infos)
    reliable = bool(infos) and all(i.qos_profile.reliability == ReliabilityPolicy.RELIABLE for i in infos)
    latched = bool(infos) and all(i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for i in infos)
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST,
                      reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)


def bag_qos(profile):
    """An rclpy ``QoSProfile`` (a publisher's offered QoS) -> the rosbags ``Qos`` a rosbag2 bag stores in its
    metadata (``offered_qos_profiles``), as ``ros2 bag record`` does."""
    from rosbags.interfaces import (Qos, QosDurability, QosHistory, QosLiveliness, QosReliability,
                                    QosTime)

    def member(enum, policy):
        return enum.__members__.get(policy.name, enum.UNKNOWN)

    def duration(d):                            # rclpy Duration
        return QosTime(d.nanoseconds // 10**9, d.nanoseconds % 10**9)
    return Qos(member(QosHistory, profile.history), int(profile.depth), member(QosReliability, profile.reliability),
               member(QosDurability, profile.durability), duration(profile.deadline), duration(profile.lifespan),
               member(QosLiveliness, profile.liveliness), duration(profile.liveliness_lease_duration),
               bool(profile.avoid_ros_namespace_conventions))


def playback_qos(offered, reliability: str = 'reliable', depth: int = QOS_DEPTH):
    """The QoS a player publishes a recorded topic with. ``offered``: the topic's recorded ``offered_qos_profiles``
    (rosbags ``Qos``; empty for bags that stored none). As ``ros2 bag play``: a topic every recorded publisher
    offered transient-local (latched: ``/tf_static``, the node's ``~/label_info``) is played transient-local, with
    the largest recorded depth, so that a subscriber that joins after the message was played still gets it;
    everything else is volatile with ``depth``. ``reliability`` as :func:`publisher_qos`."""
    from rclpy.qos import DurabilityPolicy
    from rosbags.interfaces import QosDurability
    offered = list(offered or ())
    qos = publisher_qos(reliability, depth)
    if offered and all(q.durability == QosDurability.TRANSIENT_LOCAL for q in offered):
        qos.durability = DurabilityPolicy.TRANSIENT_LOCAL
        qos.depth = max(1, max(int(q.depth) for q in offered))
    return qos


def parse_remaps(items) -> dict[str, str]:
    """``['/a:=/b', ...]`` -> ``{'/a': '/b'}``; ValueError for anything else."""
    out = {}
    for item in items or ():
        src, sep, dst = item.partition(':=')
        if not sep or not src or not dst:
            raise ValueError(f'remap must look like /from:=/to, got {item!r}')
        out[src] = dst
    return out
