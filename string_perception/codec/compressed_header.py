"""Compressed images checked before decoding: size from the header, byte structure of JPEG and PNG (ROS-free).

A decoder allocates what the header claims: a 57-byte PNG claiming 50000x50000 makes OpenCV raise, and a 249 KB
PNG that really is 16000x16000 costs 1.25 GB before any size check after decoding could refuse it. So
:func:`check_compressed` reads the size from the header and refuses, before any pixel is decoded:

- ``image_too_large``: more than ``max_side`` px per side or ``max_pixels`` in all (the preprocess limits);
- ``corrupt_image``: a byte structure no decoder should accept. PNG: signature, every chunk's length and CRC, IHDR
  first, IEND last. JPEG: SOI first, every segment's length within the data, a frame header (SOF) before the scan,
  only stuffed ``FF 00``, fill bytes and restart markers ``FF D0``-``FF D7`` (in cyclic order) inside entropy-coded
  data, a valid marker after it, and EOI at the end. libjpeg decodes a JPEG whose middle is damaged and only
  *prints* a warning that OpenCV never returns, so this scan is the check: it catches damage that breaks the marker
  structure (random bytes usually do), not damage that keeps it (e.g. zeroed bytes decode to a smeared picture).

Other formats (``tiff``, ``webp``, ...) are not parsed: the decoder's own limits apply.
"""
from __future__ import annotations

import struct
import zlib

import numpy as np

from ..runtime.errors import InputError
from ..runtime.preprocess import DEFAULT_MAX_PIXELS, DEFAULT_MAX_SIDE

__all__ = ['COMPRESSED_KINDS', 'compressed_size', 'check_compressed']

COMPRESSED_KINDS = ('corrupt_image', 'image_too_large')
PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
# markers that may follow entropy-coded data: EOI, DHT, DAC, SOS, DQT, DNL, DRI, DHP, EXP, APPn, COM
_AFTER_SCAN = {0xD9, 0xC4, 0xCC, 0xDA, 0xDB, 0xDC, 0xDD, 0xDE, 0xDF, *range(0xE0, 0xF0), 0xFE}


def _corrupt(what: str, message: str) -> InputError:
    return InputError('corrupt_image', f'{what}: {message}')


def _png_size(data: bytes, what: str) -> tuple[int, int]:
    i, n, first, size = len(PNG_SIGNATURE), len(data), True, None
    while True:
        if i + 12 > n:
            raise _corrupt(what, f'PNG ends at byte {n} inside a chunk header (truncated; no IEND)')
        length, ctype = struct.unpack_from('>I4s', data, i)
        end = i + 12 + length
        if end > n:
            raise _corrupt(what, f'PNG chunk {ctype!r} of {length} bytes runs past the end ({n} bytes)')
        (crc,) = struct.unpack_from('>I', data, end - 4)
        if zlib.crc32(data[i + 4:end - 4]) != crc:
            raise _corrupt(what, f'PNG chunk {ctype!r} at byte {i} fails its CRC (damaged data)')
        if first:
            if ctype != b'IHDR' or length != 13:
                raise _corrupt(what, f'PNG starts with chunk {ctype!r}, not a 13-byte IHDR')
            size = struct.unpack_from('>II', data, i + 8)
            first = False
        if ctype == b'IEND':
            return size
        i = end


def _scan_end(arr: np.ndarray, start: int, what: str) -> int:
    """Index of the FF of the first marker that ends the entropy-coded data beginning at ``start``."""
    body = arr[start:]
    ff = np.flatnonzero(body[:-1] == 0xFF)                       # [k] FF positions with a next byte
    nxt = body[ff + 1]
    inside = (nxt == 0x00) | (nxt == 0xFF) | ((nxt >= 0xD0) & (nxt <= 0xD7))
    rst = nxt[(nxt >= 0xD0) & (nxt <= 0xD7)]
    ends = np.flatnonzero(~inside)
    if ends.size:
        rst = rst[:np.count_nonzero((nxt[:ends[0]] >= 0xD0) & (nxt[:ends[0]] <= 0xD7))]
    if rst.size and np.any((rst - 0xD0) != np.arange(rst.size) % 8):
        raise _corrupt(what, 'JPEG restart markers out of order inside the entropy-coded data (damaged data)')
    if not ends.size:
        raise _corrupt(what, 'JPEG entropy-coded data runs to the end: no end-of-image marker (truncated)')
    pos = start + int(ff[ends[0]])
    marker = int(arr[pos + 1])
    if marker not in _AFTER_SCAN:
        raise _corrupt(what, f'JPEG has marker FF {marker:02X} inside its entropy-coded data at byte {pos} '
                             '(damaged data)')
    return pos


def _jpeg_size(data: bytes, what: str) -> tuple[int, int]:
    arr = np.frombuffer(data, np.uint8)
    i, n, size = 2, len(data), None
    while True:
        if i + 2 > n:
            raise _corrupt(what, 'JPEG ends without an end-of-image marker (truncated)')
        if data[i] != 0xFF:
            raise _corrupt(what, f'JPEG has byte {data[i]:02X} where a marker belongs (byte {i})')
        while i < n and data[i] == 0xFF:                          # fill bytes before a marker
            i += 1
        if i >= n:
            raise _corrupt(what, 'JPEG ends inside a marker (truncated)')
        marker = data[i]
        i += 1
        if marker == 0xD9:
            if size is None:
                raise _corrupt(what, 'JPEG ends before any frame header and scan')
            return size
        if 0xD0 <= marker <= 0xD7 or marker in (0x01, 0xD8):
            raise _corrupt(what, f'JPEG has marker FF {marker:02X} outside entropy-coded data (byte {i - 1})')
        if i + 2 > n:
            raise _corrupt(what, 'JPEG ends inside a segment length (truncated)')
        length = (data[i] << 8) | data[i + 1]
        if length < 2 or i + length > n:
            raise _corrupt(what, f'JPEG segment FF {marker:02X} of {length} bytes runs past the end ({n} bytes)')
        if marker in _SOF:
            if length < 8:
                raise _corrupt(what, 'JPEG frame header too short')
            h, w = struct.unpack_from('>HH', data, i + 3)
            size = (w, h)
        i += length
        if marker == 0xDA:
            if size is None:
                raise _corrupt(what, 'JPEG scan before its frame header')
            i = _scan_end(arr, i, what)


def compressed_size(data: bytes, what: str = 'compressed image') -> tuple[str, int, int] | None:
    """``('png' | 'jpeg', width, height)`` from a PNG / JPEG's header after checking its byte structure
    (``InputError('corrupt_image')``); None for other formats."""
    data = bytes(data)
    if data.startswith(PNG_SIGNATURE):
        w, h = _png_size(data, what)
        return 'png', w, h
    if data[:2] == b'\xff\xd8':
        w, h = _jpeg_size(data, what)
        return 'jpeg', w, h
    return None


def check_compressed(data: bytes, what: str = 'compressed image', *, max_side: int = DEFAULT_MAX_SIDE,
                     max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[str, int, int] | None:
    """:func:`compressed_size`, plus ``image_too_large`` (the header's size beyond the limits) and
    ``corrupt_image`` for a zero width or height; run it before decoding."""
    found = compressed_size(data, what)
    if found is None:
        return None
    fmt, w, h = found
    if w == 0 or h == 0:
        raise _corrupt(what, f'{fmt} header claims {w}x{h} pixels')
    if w > max_side or h > max_side or w * h > max_pixels:
        raise InputError('image_too_large', f'{what}: {fmt} header claims {w}x{h} pixels, beyond the limits '
                                            f'({max_side} px per side, {max_pixels} px in all); refused before '
                                            'decoding')
    return found
