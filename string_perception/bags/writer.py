"""``BagWriter``: a rosbag2 (sqlite3 or mcap) with one connection per topic, written from rosbags message objects
or from CDR bytes (what ``record`` receives and what rclpy's ``serialize_message`` gives).

    with BagWriter('out/bag', storage='mcap') as bag:
        bag.write('/camera/color/camera_info', info_msg, log_time_ns)           # a rosbags message
        bag.write_cdr('/detections', 'vision_msgs/msg/Detection3DArray', raw, log_time_ns)

    with BagWriter('out/long', split=SplitPolicy(max_duration_s=60)) as bag:   # long_0.db3, long_1.db3, ...
        ...
"""
from __future__ import annotations

import shutil
from io import BytesIO
from pathlib import Path
from typing import Any, Sequence

import yaml
from rosbags.rosbag2 import StoragePlugin, Writer, WriterError
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode
from rosbags.rosbag2.storage_mcap import Channel, McapWriter, write_channel, write_string

from .splitting import SplitPolicy, merge_part_metadata
from .typestore import make_typestore

__all__ = ['BagWriter', 'STORAGES', 'COMPRESSION_MODES', 'BAG_VERSION', 'read_metadata']

STORAGES = {'sqlite3': StoragePlugin.SQLITE3, 'mcap': StoragePlugin.MCAP}
BAG_VERSION = 9          # rosbag2 metadata version that ros2 bag writes on Jazzy and Kilted (8 and older still read)
# ros2 bag record --compression-mode: 'file' compresses each storage file when the bag closes, 'message' each
# message's bytes; the format is zstd (rosbag2's only one). rosbags' Reader (and ros2 bag) decompress either.
COMPRESSION_MODES = ('none', 'file', 'message')


class _McapChannelsWithHash(McapWriter):
    """rosbags' MCAP storage, with each channel's metadata as rosbag2's MCAP plugin writes it: the topic's
    ``offered_qos_profiles`` and its ``topic_type_hash`` (the RIHS01 type hash; rosbags writes only the former)."""

    def add_connection(self, connection, offered_qos_profiles: str) -> None:
        metadata = BytesIO()
        for key, value in (('offered_qos_profiles', offered_qos_profiles), ('topic_type_hash', connection.digest)):
            write_string(metadata, key)
            write_string(metadata, value)
        self.channels.append(Channel(connection.id, connection.msgtype, connection.topic,
                                     connection.ext.serialization_format, metadata.getvalue()))
        self.channel_stats[connection.id] = 0
        write_channel(self.chunk.bio, self.channels[-1], self.schemas)


class _Rosbag2Writer(Writer):
    """rosbags' ``Writer`` with :class:`_McapChannelsWithHash` as its MCAP storage."""
    STORAGE_PLUGINS = {**Writer.STORAGE_PLUGINS, StoragePlugin.MCAP: _McapChannelsWithHash}


class BagWriter:
    """Context manager around ``rosbags.rosbag2.Writer``; the bag folder must not exist yet. ``compression``: one
    of :data:`COMPRESSION_MODES` (zstd). ``split``: when to start the next storage file (``splitting.SplitPolicy``;
    default: one file). After the bag closes, ``storage_files`` names its files."""

    def __init__(self, path: str | Path, storage: str = 'sqlite3', custom_data: dict[str, str] | None = None,
                 compression: str = 'none', split: SplitPolicy | None = None):
        if storage not in STORAGES:
            raise ValueError(f'storage must be one of {", ".join(STORAGES)}, got {storage!r}')
        if compression not in COMPRESSION_MODES:
            raise ValueError(f'compression must be one of {", ".join(COMPRESSION_MODES)}, got {compression!r}')
        self.path = Path(path)
        if self.path.exists():
            raise WriterError(f'{self.path} exists already, not overwriting.')
        self.split = split if split is not None else SplitPolicy()
        self.typestore = make_typestore()
        self._storage, self._compression = STORAGES[storage], compression
        self._custom_data = {str(k): str(v) for k, v in (custom_data or {}).items()}
        self._specs: dict[str, tuple[str, dict[str, Any]]] = {}   # topic -> (msgtype, add_connection kwargs)
        self._connections: dict[str, Any] = {}                      # topic -> connection in the current file
        self.counts: dict[str, int] = {}
        self.storage_files: list[str] = []
        self._parts: list[dict[str, Any]] = []                      # finished files' metadata (split bags)
        self._file_messages = self._file_bytes = self._file_first_ns = 0
        # a split bag's files are written as one-file bags in <bag>/<bag>_<i>/, then moved up (see _finish_file)
        self._writer = self._file_writer(self.path / f'{self.path.name}_0' if self.split.enabled else self.path)

    def _file_writer(self, path: Path) -> Writer:
        writer = _Rosbag2Writer(path, version=BAG_VERSION, storage_plugin=self._storage)
        writer.set_compression(CompressionMode[self._compression.upper()], CompressionFormat.ZSTD)
        for k, v in self._custom_data.items():
            writer.set_custom_data(k, v)
        return writer

    def __enter__(self) -> 'BagWriter':
        self._writer.open()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._writer.__exit__(exc_type, exc, tb)      # closes the file, or aborts it after an exception
        if not self.split.enabled:
            if exc_type is None:
                self.storage_files = list(read_metadata(self.path)['relative_file_paths'])
            return
        if exc_type is None:
            self._finish_file()
        if self._parts:                               # after an exception: the files finished before it
            merged = merge_part_metadata(self._parts)
            tmp = self.path / 'metadata.yaml.tmp'
            tmp.write_text(yaml.safe_dump({'rosbag2_bagfile_information': merged}, default_flow_style=False,
                                          sort_keys=False), 'utf8')
            tmp.replace(self.path / 'metadata.yaml')
            self.storage_files = list(merged['relative_file_paths'])

    def _finish_file(self) -> None:
        """Move the closed file's storage up into the bag folder and keep its metadata for the bag's."""
        folder = self._writer.path
        info = read_metadata(folder)
        for name in info['relative_file_paths']:
            (folder / name).replace(self.path / name)
        shutil.rmtree(folder)
        self._parts.append(info)

    def _next_file(self) -> None:
        self._writer.close()
        self._finish_file()
        self._writer = self._file_writer(self.path / f'{self.path.name}_{len(self._parts)}')
        self._writer.open()
        self._connections = {}
        for topic in self._specs:                     # every file holds every known topic's connection
            self._add_connection(topic)
        self._file_messages = self._file_bytes = 0

    def _add_connection(self, topic: str):
        msgtype, kwargs = self._specs[topic]
        conn = self._connections[topic] = self._writer.add_connection(topic, msgtype, **kwargs)
        return conn

    def connection(self, topic: str, msgtype: str, msgdef: str | None = None, rihs01: str | None = None,
                   offered_qos: Sequence[Any] = ()):
        """The topic's connection (added on first use; one message type per topic). The definition comes from
        ``msgdef`` + ``rihs01`` when both are given (copying a bag), else from the typestore. ``offered_qos``: the
        publishers' QoS (rosbags ``Qos``, see ``ros_io.bag_qos``), stored so that a player can offer it again."""
        conn = self._connections.get(topic)
        if conn is None:
            given = msgdef is not None and rihs01 is not None
            self._specs[topic] = (msgtype, {'typestore': None if given else self.typestore,
                                            'msgdef': msgdef if given else None, 'rihs01': rihs01 if given else None,
                                            'offered_qos_profiles': list(offered_qos)})
            conn = self._add_connection(topic)
            self.counts[topic] = 0
        elif conn.msgtype != msgtype:
            raise ValueError(f'topic {topic} already holds {conn.msgtype}, not {msgtype}')
        return conn

    def write(self, topic: str, msg: Any, log_time_ns: int) -> None:
        """Serialise a rosbags message (its type is ``msg.__msgtype__``) at ``log_time_ns``."""
        msgtype = msg.__msgtype__
        self.write_cdr(topic, msgtype, self.typestore.serialize_cdr(msg, msgtype), log_time_ns)

    def write_cdr(self, topic: str, msgtype: str, data: bytes | memoryview, log_time_ns: int) -> None:
        """Write an already CDR-serialised message (into the next storage file when the split policy says so)."""
        log_time_ns = int(log_time_ns)
        if self.split.due(self._file_messages, self._file_bytes, self._file_first_ns, log_time_ns):
            self._next_file()
        self._writer.write(self.connection(topic, msgtype), log_time_ns, data)
        if self._file_messages == 0:
            self._file_first_ns = log_time_ns
        self._file_messages += 1
        self._file_bytes += len(data)
        self.counts[topic] += 1


def read_metadata(bag: str | Path) -> dict[str, Any]:
    """A bag folder's ``metadata.yaml`` (its ``rosbag2_bagfile_information``)."""
    return yaml.safe_load((Path(bag) / 'metadata.yaml').read_text('utf8'))['rosbag2_bagfile_information']
