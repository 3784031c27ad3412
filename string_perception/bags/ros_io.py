"""rclpy helpers shared by the player and the recorder: message classes by type name and QoS choices.
Imports rclpy lazily; the caller has set the DDS environment (``ros.dds_env``) before ``rclpy.init``."""
from __future__ import annotations

import importlib

__all__ = ['message_class', 'publisher_qos', 'adaptive_qos', 'parse_remaps']

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
    accept it too)."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
    rel = ReliabilityPolicy.BEST_EFFORT if reliability == 'best_effort' else ReliabilityPolicy.RELIABLE
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST, reliability=rel,
                      durability=DurabilityPolicy.VOLATILE)


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


def parse_remaps(items) -> dict[str, str]:
    """``['/a:=/b', ...]`` -> ``{'/a': '/b'}``; ValueError for anything else."""
    out = {}
    for item in items or ():
        src, sep, dst = item.partition(':=')
        if not sep or not src or not dst:
            raise ValueError(f'remap must look like /from:=/to, got {item!r}')
        out[src] = dst
    return out
