"""Compressed images checked before decoding (codec/compressed_header.py, and the decoders that use it)."""
import struct
import zlib
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from string_perception.codec.compressed_header import check_compressed, compressed_size
from string_perception.codec.image_conversion import compressed_imgmsg_to_array
from string_perception.runtime.errors import InputError
from string_perception.scenes import SceneConfig, generate_frame


@pytest.fixture(scope='module')
def frame():
    return generate_frame(2_000_000_123, SceneConfig(height=240, width=320))


def _chunk(ctype: bytes, data: bytes) -> bytes:
    return struct.pack('>I', len(data)) + ctype + data + struct.pack('>I', zlib.crc32(ctype + data))


def png_claiming(w: int, h: int) -> bytes:
    """A tiny, well-formed PNG whose header claims ``w x h`` (the decompression-bomb case of issue 36)."""
    return (b'\x89PNG\r\n\x1a\n' + _chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0))
            + _chunk(b'IDAT', zlib.compress(b'')) + _chunk(b'IEND', b''))


def corrupt_middle(data: bytes, seed: int = 7, n: int = 512) -> bytes:
    """``data`` with ``n`` random bytes written over its middle."""
    c = bytearray(data)
    m = len(c) // 2
    c[m:m + n] = np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()
    return bytes(c)


def _kind(data):
    with pytest.raises(InputError) as e:
        check_compressed(data)
    return e.value.kind


@pytest.mark.parametrize('ext, flags', [('.jpg', []), ('.jpg', [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]),
                                        ('.jpg', [cv2.IMWRITE_JPEG_RST_INTERVAL, 3]), ('.png', [])])
def test_valid_images_give_their_size(frame, ext, flags):
    data = cv2.imencode(ext, frame.rgb, flags)[1].tobytes()
    assert check_compressed(data) == ('jpeg' if ext == '.jpg' else 'png', 320, 240)
    assert compressed_size(cv2.imencode('.png', frame.depth_mm)[1].tobytes()) == ('png', 320, 240)


def test_png_header_claiming_50000_squared_is_refused_before_decoding():
    bomb = png_claiming(50000, 50000)
    assert len(bomb) < 80
    assert _kind(bomb) == 'image_too_large'
    with pytest.raises(InputError, match='refused before decoding') as e:         # not a cv2.error
        compressed_imgmsg_to_array(SimpleNamespace(format='png', data=bomb), 'rgb8')
    assert e.value.kind == 'image_too_large'                                      # the node counts that kind


def test_png_that_really_is_16000_squared_is_refused_from_its_header():
    z, row = zlib.compressobj(9), bytes(1 + 16000)                                # filter byte + a grey row
    idat = b''.join(z.compress(row) for _ in range(16000)) + z.flush()
    big = (b'\x89PNG\r\n\x1a\n' + _chunk(b'IHDR', struct.pack('>IIBBBBB', 16000, 16000, 8, 0, 0, 0, 0))
           + _chunk(b'IDAT', idat) + _chunk(b'IEND', b''))                        # a real 16000x16000 PNG
    assert len(big) < 400_000                                                      # small on the wire
    assert _kind(big) == 'image_too_large'


@pytest.mark.parametrize('seed', range(5))
def test_jpeg_corrupted_in_its_middle_is_refused(frame, seed):
    data = cv2.imencode('.jpg', frame.rgb)[1].tobytes()
    bad = corrupt_middle(data, seed)
    assert cv2.imdecode(np.frombuffer(bad, np.uint8), cv2.IMREAD_UNCHANGED) is not None    # libjpeg decodes it
    assert _kind(bad) == 'corrupt_image'


def test_truncated_and_damaged_files_are_corrupt(frame):
    jpg = cv2.imencode('.jpg', frame.rgb)[1].tobytes()
    png = cv2.imencode('.png', frame.rgb)[1].tobytes()
    for bad in (jpg[:len(jpg) // 2], jpg[:-2], png[:len(png) // 2], corrupt_middle(png, n=16),
                png_claiming(0, 10), b'\xff\xd8\xff\xd9'):
        assert _kind(bad) == 'corrupt_image'
    assert check_compressed(b'RIFF....WEBP') is None                               # not parsed: the decoder's limits


def test_a_header_size_within_the_limits_passes():
    assert check_compressed(png_claiming(640, 480), max_side=640, max_pixels=640 * 480) == ('png', 640, 480)
    with pytest.raises(InputError, match='beyond the limits'):
        check_compressed(png_claiming(641, 480), max_side=640)


def test_compressed_depth_png_bomb_is_refused_before_decoding():
    from string_perception.codec.compressed_depth import HEADER, decode_compressed_depth
    msg = SimpleNamespace(format='16UC1; compressedDepth png',
                          data=HEADER.pack(0, 0.0, 0.0) + png_claiming(50000, 50000))
    with pytest.raises(InputError, match='refused before decoding') as e:
        decode_compressed_depth(msg)
    assert e.value.kind == 'image_too_large'
