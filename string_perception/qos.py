"""The KEEP_LAST QoS profile of the parameters' two reliability names, one rule for every rclpy user: the nodes
(``ros/lifecycle_node.py``: their ``*_qos_reliability`` / ``*_qos_depth`` parameters) and the bag tools
(``bags/ros_io.py``: the player's and recorder's publishers). Imports rclpy; import it only where rclpy is.
"""
from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

__all__ = ['qos_profile']


def qos_profile(reliability: str, depth: int, durability=DurabilityPolicy.VOLATILE) -> QoSProfile:
    """KEEP_LAST ``depth``; ``reliability`` 'best_effort' or 'reliable' (the parameters' two values)."""
    rel = ReliabilityPolicy.BEST_EFFORT if reliability == 'best_effort' else ReliabilityPolicy.RELIABLE
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST, reliability=rel, durability=durability)
