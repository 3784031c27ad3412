"""Checksum of an ONNX model's weights, recorded by the exporter in ``metadata_props['weights_sha256']``.

The one definition both sides use (export writes it, :class:`~string_perception.runtime.onnx_runner.OnnxModel`
checks it). ``weights_sha256`` is the SHA-256 over the top-level graph initializers **in graph order**; for each
initializer the hash is fed, little-endian and length-prefixed so no two different lists give the same stream::

    u64 len(name_utf8) | name_utf8 | u64 len(dtype_str) | dtype_str | u64 ndim | u64 dim[0] ... | u64 nbytes | bytes

where ``dtype_str`` is numpy's ``dtype.str`` of ``onnx.numpy_helper.to_array(init)`` (e.g. ``'<f4'``) and
``bytes`` = ``to_array(init).tobytes()`` (C order). Going through ``to_array`` makes the answer independent of how
the tensor is stored (``raw_data`` vs typed fields such as ``float_data``/``int32_data``). Metadata, node
attributes (``Constant`` nodes) and sparse initializers are not covered: exporters should keep weights as
initializers. External data must be loaded into the model before hashing.
"""
from __future__ import annotations

import hashlib
import struct

import numpy as np
import onnx
from onnx import numpy_helper

__all__ = ['weights_sha256']


def _u64(n: int) -> bytes:
    return struct.pack('<Q', n)


def _tensor_bytes(arr: np.ndarray) -> bytes:
    if arr.dtype == object:  # string tensors: length-prefixed utf-8 of each element, C order
        return b''.join(_u64(len(b)) + b for b in
                        (s if isinstance(s, bytes) else str(s).encode('utf-8') for s in arr.ravel()))
    arr = np.ascontiguousarray(arr)
    if arr.dtype.byteorder == '>':  # always hash little-endian
        arr = arr.astype(arr.dtype.newbyteorder('<'))
    return arr.tobytes()


def weights_sha256(model: onnx.ModelProto) -> str:
    """Hex SHA-256 of ``model.graph.initializer`` (names, dtypes, shapes, values) in graph order."""
    h = hashlib.sha256()
    for init in model.graph.initializer:
        arr = numpy_helper.to_array(init)
        name = init.name.encode('utf-8')
        dtype = arr.dtype.str.encode('ascii')
        data = _tensor_bytes(arr)
        h.update(_u64(len(name)) + name + _u64(len(dtype)) + dtype + _u64(arr.ndim))
        h.update(b''.join(_u64(d) for d in arr.shape))
        h.update(_u64(len(data)))
        h.update(data)
    return h.hexdigest()
