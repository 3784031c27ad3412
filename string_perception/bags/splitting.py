"""Splitting a recording into several storage files, as ``ros2 bag record --max-bag-size / --max-bag-duration``.

A split bag is still one rosbag2 folder: ``<bag>_0.db3``, ``<bag>_1.db3``, ... (or ``.mcap``) and one
``metadata.yaml`` that lists them in ``relative_file_paths`` and ``files`` (each file's start, duration and message
count), with the bag's totals. Every file holds the connections of all topics known when it was opened, so each
file can be read alone; rosbags' ``Reader`` and ``ros2 bag`` read the files in order as one bag.

:class:`SplitPolicy` decides when to start the next file; :func:`merge_part_metadata` builds the bag's metadata
from the files' own (each file is written as a one-file bag by rosbags' ``Writer``, see ``writer.BagWriter``).
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

__all__ = ['SplitPolicy', 'merge_part_metadata']


@dataclass(frozen=True)
class SplitPolicy:
    """When a storage file is full. ``max_bytes``: message bytes written into the current file (the file adds
    its index and connection records on top, a few percent); ``max_duration_s``: log-time span of the current
    file. The first message past either limit opens the next file; a file always holds at least one message.
    0 turns a limit off (both 0: one file, as without splitting)."""
    max_bytes: int = 0
    max_duration_s: float = 0.0

    def __post_init__(self):
        if isinstance(self.max_bytes, bool) or not isinstance(self.max_bytes, int) or self.max_bytes < 0:
            raise ValueError(f'max_bytes must be an integer >= 0 (0 = no size limit), got {self.max_bytes!r}')
        if not (isinstance(self.max_duration_s, (int, float)) and math.isfinite(self.max_duration_s)
                and self.max_duration_s >= 0):
            raise ValueError(f'max_duration_s must be a finite number >= 0 (0 = no duration limit), '
                             f'got {self.max_duration_s!r}')

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0 or self.max_duration_s > 0

    def due(self, file_messages: int, file_bytes: int, file_first_ns: int, log_time_ns: int) -> bool:
        """Whether the message logged at ``log_time_ns`` starts a new file, given the current file's message
        count, message bytes and first log time."""
        if file_messages == 0:
            return False
        if self.max_bytes and file_bytes >= self.max_bytes:
            return True
        return bool(self.max_duration_s) and log_time_ns - file_first_ns >= self.max_duration_s * 1e9


def merge_part_metadata(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The bag's ``rosbag2_bagfile_information`` from its files' own (one-file bags, in order): files and paths
    concatenated, message counts summed per topic and in total, start and duration spanning the files that hold
    messages. Version, storage, compression and custom data come from the first file (they are the same in all)."""
    if not parts:
        raise ValueError('a bag needs at least one storage file')
    out = copy.deepcopy(parts[0])
    files = [copy.deepcopy(f) for part in parts for f in part['files']]
    out['relative_file_paths'] = [p for part in parts for p in part['relative_file_paths']]
    out['files'] = files
    out['message_count'] = sum(int(f['message_count']) for f in files)
    holding = [f for f in files if int(f['message_count']) > 0]
    if holding:                                  # an empty file's start is a placeholder (rosbags: 2**63 - 1)
        start = min(int(f['starting_time']['nanoseconds_since_epoch']) for f in holding)
        end = max(int(f['starting_time']['nanoseconds_since_epoch']) + int(f['duration']['nanoseconds'])
                  for f in holding)
        out['starting_time'] = {'nanoseconds_since_epoch': start}
        out['duration'] = {'nanoseconds': end - start}
    topics: dict[str, dict[str, Any]] = {}
    for part in parts:
        for entry in part['topics_with_message_count']:
            name = entry['topic_metadata']['name']
            if name in topics:
                topics[name]['message_count'] += int(entry['message_count'])
            else:
                topics[name] = {'topic_metadata': copy.deepcopy(entry['topic_metadata']),
                                'message_count': int(entry['message_count'])}
    out['topics_with_message_count'] = list(topics.values())
    return out
