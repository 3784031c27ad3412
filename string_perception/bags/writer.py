"""``BagWriter``: a rosbag2 (sqlite3 or mcap) with one connection per topic, written from rosbags message objects
or from CDR bytes (what ``record`` receives and what rclpy's ``serialize_message`` gives).

    with BagWriter('out/bag', storage='mcap') as bag:
        bag.write('/camera/color/camera_info', info_msg, log_time_ns)           # a rosbags message
        bag.write_cdr('/detections', 'vision_msgs/msg/Detection3DArray', raw, log_time_ns)
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode

from .typestore import make_typestore

__all__ = ['BagWriter', 'STORAGES', 'COMPRESSION_MODES', 'BAG_VERSION']

STORAGES = {'sqlite3': StoragePlugin.SQLITE3, 'mcap': StoragePlugin.MCAP}
BAG_VERSION = 8          # rosbag2 metadata version read by Jazzy and Kilted
# ros2 bag record --compression-mode: 'file' compresses each storage file when the bag closes, 'message' each
# message's bytes; the format is zstd (rosbag2's only one). rosbags' Reader (and ros2 bag) decompress either.
COMPRESSION_MODES = ('none', 'file', 'message')


class BagWriter:
    """Context manager around ``rosbags.rosbag2.Writer``; the bag folder must not exist yet. ``compression``: one
    of :data:`COMPRESSION_MODES` (zstd)."""

    def __init__(self, path: str | Path, storage: str = 'sqlite3', custom_data: dict[str, str] | None = None,
                 compression: str = 'none'):
        if storage not in STORAGES:
            raise ValueError(f'storage must be one of {", ".join(STORAGES)}, got {storage!r}')
        if compression not in COMPRESSION_MODES:
            raise ValueError(f'compression must be one of {", ".join(COMPRESSION_MODES)}, got {compression!r}')
        self.path = Path(path)
        self.typestore = make_typestore()
        self._writer = Writer(self.path, version=BAG_VERSION, storage_plugin=STORAGES[storage])
        self._writer.set_compression(CompressionMode[compression.upper()], CompressionFormat.ZSTD)
        for k, v in (custom_data or {}).items():
            self._writer.set_custom_data(str(k), str(v))
        self._connections: dict[str, Any] = {}
        self.counts: dict[str, int] = {}

    def __enter__(self) -> 'BagWriter':
        self._writer.open()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._writer.__exit__(exc_type, exc, tb)

    def connection(self, topic: str, msgtype: str, msgdef: str | None = None, rihs01: str | None = None,
                   offered_qos: Sequence[Any] = ()):
        """The topic's connection (added on first use; one message type per topic). The definition comes from
        ``msgdef`` + ``rihs01`` when both are given (copying a bag), else from the typestore. ``offered_qos``: the
        publishers' QoS (rosbags ``Qos``, see ``ros_io.bag_qos``), stored so that a player can offer it again."""
        conn = self._connections.get(topic)
        if conn is None:
            given = msgdef is not None and rihs01 is not None
            conn = self._writer.add_connection(topic, msgtype, typestore=None if given else self.typestore,
                                               msgdef=msgdef if given else None, rihs01=rihs01 if given else None,
                                               offered_qos_profiles=list(offered_qos))
            self._connections[topic] = conn
            self.counts[topic] = 0
        elif conn.msgtype != msgtype:
            raise ValueError(f'topic {topic} already holds {conn.msgtype}, not {msgtype}')
        return conn

    def write(self, topic: str, msg: Any, log_time_ns: int) -> None:
        """Serialise a rosbags message (its type is ``msg.__msgtype__``) at ``log_time_ns``."""
        msgtype = msg.__msgtype__
        self.write_cdr(topic, msgtype, self.typestore.serialize_cdr(msg, msgtype), log_time_ns)

    def write_cdr(self, topic: str, msgtype: str, data: bytes | memoryview, log_time_ns: int) -> None:
        """Write an already CDR-serialised message."""
        self._writer.write(self.connection(topic, msgtype), int(log_time_ns), data)
        self.counts[topic] += 1
