"""DDS environment for string_perception processes: Fast DDS, loopback only, own domain id.

Used by the tests, the demo and the launch file so that every process they start talks over the same
transport settings (``config/fastdds_loopback.xml``: 16 MiB shared memory + UDP on 127.0.0.1 only) and
never leaves the host. The variables must be in the environment before the process creates its first
ROS context (``rclpy.init``); for child processes pass ``env=merged_dds_env(...)`` to ``subprocess``.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .paths import config_file

PROFILE_NAME = 'fastdds_loopback.xml'
RMW = 'rmw_fastrtps_cpp'
MAX_DOMAIN_ID = 101   # highest id whose RTPS ports stay below Linux's ephemeral range (ROS 2 docs)


def default_profile() -> Path:
    """The shipped loopback profile (installed share dir or the source tree)."""
    return config_file(PROFILE_NAME)


def dds_env(domain_id: int | str | None = None, *, profile: str | os.PathLike | None = None,
            localhost_only: bool | None = None) -> dict[str, str]:
    """The DDS variables (only those) for a string_perception process.

    domain_id: ROS_DOMAIN_ID (0..101); None keeps ``$ROS_DOMAIN_ID`` or 0.
    profile: Fast DDS XML profile; None = the shipped loopback profile, '' = no profile (Fast DDS defaults).
    localhost_only: ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST if True, SUBNET if False. None (default): SUBNET
        when a profile is used, LOCALHOST without one. With LOCALHOST, rmw_fastrtps adds its own UDP transport
        and the node had sockets bound to 0.0.0.0 and to the Ethernet address next to the profile's; with SUBNET
        the profile alone decides, and the loopback profile keeps every socket on 127.0.0.1
        (test_node_load.py checks the node's sockets).
    """
    if domain_id is None:
        domain_id = os.environ.get('ROS_DOMAIN_ID', '0') or '0'
    dom = int(domain_id)
    if not 0 <= dom <= MAX_DOMAIN_ID:
        raise ValueError(f'ROS_DOMAIN_ID must be in 0..{MAX_DOMAIN_ID}, got {dom}')
    if profile is None:
        profile = default_profile()
    if localhost_only is None:
        localhost_only = not str(profile)
    env = {
        'RMW_IMPLEMENTATION': RMW,
        'ROS_DOMAIN_ID': str(dom),
        'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST' if localhost_only else 'SUBNET',
    }
    if str(profile):
        path = Path(profile).expanduser().resolve()
        if not path.is_file():
            raise FileNotFoundError(f'Fast DDS profile not found: {path}')
        env['FASTDDS_DEFAULT_PROFILES_FILE'] = str(path)
    return env


def merged_dds_env(domain_id: int | str | None = None, *, base: Mapping[str, str] | None = None,
                   **kwargs) -> dict[str, str]:
    """A full environment for a child process: ``base`` (default os.environ) plus :func:`dds_env`.

    Drops the deprecated ROS_LOCALHOST_ONLY (it conflicts with ROS_AUTOMATIC_DISCOVERY_RANGE) and, when a
    profile is used, FASTRTPS_DEFAULT_PROFILES_FILE (the pre-3.0 name) so only one profile applies.
    """
    env = dict(os.environ if base is None else base)
    dds = dds_env(domain_id, **kwargs)
    env.pop('ROS_LOCALHOST_ONLY', None)
    if 'FASTDDS_DEFAULT_PROFILES_FILE' in dds:
        env.pop('FASTRTPS_DEFAULT_PROFILES_FILE', None)
    else:
        env.pop('FASTDDS_DEFAULT_PROFILES_FILE', None)
    env.update(dds)
    return env


def apply_dds_env(domain_id: int | str | None = None, **kwargs) -> dict[str, str]:
    """Set the DDS variables in THIS process (call before ``rclpy.init``). Returns what was set."""
    dds = dds_env(domain_id, **kwargs)
    os.environ.pop('ROS_LOCALHOST_ONLY', None)
    os.environ.pop('FASTDDS_DEFAULT_PROFILES_FILE' if 'FASTDDS_DEFAULT_PROFILES_FILE' not in dds
                   else 'FASTRTPS_DEFAULT_PROFILES_FILE', None)
    os.environ.update(dds)
    return dds
