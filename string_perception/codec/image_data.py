"""What both image codecs (``image_conversion.py`` and ``compressed_depth.py``) share, so neither imports the other's
caller: the error type, the stand-ins for sensor_msgs/Image and CompressedImage when sensor_msgs is not
importable, and the guarded ``cv2.imdecode`` (compressed header checked first). ROS-free and torch-free;
``image_conversion`` re-exports every name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .compressed_header import check_compressed

__all__ = ['ImageEncodingError', 'ImageData', 'CompressedImageData', 'guarded_imdecode']


class ImageEncodingError(ValueError):
    """An image message cannot be converted: unknown encoding, inconsistent size/step/data, bad array."""


@dataclass
class ImageData:
    """Stand-in for sensor_msgs/Image when sensor_msgs is not importable (same field names)."""
    height: int = 0
    width: int = 0
    encoding: str = ''
    is_bigendian: int = 0
    step: int = 0
    data: bytes = b''
    header: Any = None


@dataclass
class CompressedImageData:
    """Stand-in for sensor_msgs/CompressedImage (same field names)."""
    format: str = ''
    data: bytes = b''
    header: Any = None
    extra: dict = field(default_factory=dict)


def guarded_imdecode(raw: np.ndarray, what: str) -> np.ndarray:
    """``cv2.imdecode(raw, IMREAD_UNCHANGED)`` after :func:`.compressed_header.check_compressed` (size from the
    header, byte structure): a header claiming too many pixels or broken data never reaches the decoder and raises
    :class:`~string_perception.runtime.errors.InputError` (``image_too_large`` / ``corrupt_image``); a decoder
    failure (including a ``cv2.error``) is an ImageEncodingError."""
    import cv2    # optional here: only compressed data needs OpenCV
    check_compressed(raw.tobytes(), what)       # InputError image_too_large / corrupt_image: keeps its kind
    try:
        img = cv2.imdecode(raw, cv2.IMREAD_UNCHANGED)
    except cv2.error as e:
        raise ImageEncodingError(f'could not decode {what}: {e}') from None
    if img is None:
        raise ImageEncodingError(f'could not decode {what}: undecodable data')
    return img
