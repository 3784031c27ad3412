"""Which file of a model to run on this machine: the fp32 file or its int8 sibling (``export.optimize``).

``choose_model_file(path, precision='auto')`` -> :class:`ModelChoice` ``(path, precision, reason)``:

* ``precision='fp32'``: ``path`` itself, always.
* ``precision='int8'``: the int8 sibling ``<stem>_int8.onnx`` (``FileNotFoundError`` when it is absent), whatever
  the CPU (the user asked for it).
* ``precision='auto'``: the int8 sibling only when it exists, the session runs on the CPU (``on_cpu``; GPU providers
  run the fp32 file), and the CPU has the int8 dot-product kernels that make ONNX Runtime's int8 MatMuls faster than
  fp32 (x86 flags ``amx_int8``, ``avx512_vnni`` or ``avx_vnni``, read from ``/proc/cpuinfo``); otherwise ``path``.
  AVX2-only x86 (int8 emulated with pmaddubsw: slower than fp32) and ARM (not measured) run fp32.

``reason`` is one sentence for the log line saying which file runs and why. A ``path`` that already is an int8 file
is run as given. Reads no ONNX file. The node takes ``precision`` from the environment variable
``STRING_PERCEPTION_MODEL_PRECISION`` (``auto`` when unset: :func:`requested_precision`):
:func:`node_model_choice` is that rule, also for tests and tools that must run the file the node runs.
"""
from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

__all__ = ['INT8_KERNEL_FLAGS', 'PRECISION_CHOICES', 'PRECISION_ENV', 'ModelChoice', 'int8_path', 'cpu_flags',
           'int8_kernels', 'requested_precision', 'choose_model_file', 'node_model_choice']

INT8_KERNEL_FLAGS = ('amx_int8', 'avx512_vnni', 'avx_vnni')   # any one: MLAS runs u8s8 GEMMs with VNNI / AMX
PRECISION_CHOICES = ('auto', 'fp32', 'int8')
PRECISION_ENV = 'STRING_PERCEPTION_MODEL_PRECISION'
_X86 = ('x86_64', 'amd64', 'i686', 'i386', 'x86')


@dataclass(frozen=True)
class ModelChoice:
    path: Path
    precision: str   # 'fp32' | 'int8' (what the chosen file is meant to be; its metadata says it for sure)
    reason: str


def int8_path(path: str | os.PathLike) -> Path:
    """``models/x.onnx`` -> ``models/x_int8.onnx`` (where ``string-perception-optimize`` writes by default)."""
    p = Path(path)
    return p.with_name(f'{p.stem}_int8{p.suffix}')


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The CPU feature flags (x86 ``flags``, ARM ``Features``) of the first processor in ``/proc/cpuinfo`` text
    (read from the file when None; empty when it cannot be read, e.g. not Linux)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path('/proc/cpuinfo').read_text()
        except OSError:
            return frozenset()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(':')
        if key.strip().lower() in ('flags', 'features'):
            return frozenset(value.split())
    return frozenset()


def int8_kernels(flags: frozenset[str] | None = None, machine: str | None = None) -> tuple[bool, str]:
    """Whether this CPU has int8 kernels that beat fp32 here -> ``(yes, why)``."""
    machine = (machine if machine is not None else platform.machine()).lower()
    if machine not in _X86:
        return False, f'{machine or "unknown"} CPU: int8 speed not measured there'
    flags = cpu_flags() if flags is None else flags
    have = [f for f in INT8_KERNEL_FLAGS if f in flags]
    if have:
        return True, f'CPU has {", ".join(have)}'
    return False, f'CPU lacks {"/".join(INT8_KERNEL_FLAGS)} (int8 would be slower than fp32)'


def requested_precision(environ: Mapping[str, str] | None = None) -> str:
    """``STRING_PERCEPTION_MODEL_PRECISION`` (lower-cased; ``auto`` when unset or empty); ``ValueError`` when it
    is not one of :data:`PRECISION_CHOICES`."""
    value = (os.environ if environ is None else environ).get(PRECISION_ENV, '').strip().lower() or 'auto'
    if value not in PRECISION_CHOICES:
        raise ValueError(f'{PRECISION_ENV}={value!r}: use one of {PRECISION_CHOICES}')
    return value


def choose_model_file(path: str | os.PathLike, precision: str = 'auto', *, on_cpu: bool = True,
                      flags: frozenset[str] | None = None, machine: str | None = None) -> ModelChoice:
    """See the module docstring."""
    path = Path(path)
    if precision not in PRECISION_CHOICES:
        raise ValueError(f'precision must be one of {PRECISION_CHOICES}, got {precision!r}')
    if path.stem.endswith('_int8'):
        return ModelChoice(path, 'int8', f'{path.name} given')
    sibling = int8_path(path)
    if precision == 'fp32':
        return ModelChoice(path, 'fp32', 'fp32 requested')
    if precision == 'int8':
        if not sibling.is_file():
            raise FileNotFoundError(f'int8 requested but {sibling} does not exist (string-perception-optimize '
                                    f'{path} makes it)')
        return ModelChoice(sibling, 'int8', 'int8 requested')
    if not sibling.is_file():
        return ModelChoice(path, 'fp32', f'no int8 variant {sibling.name}')
    if not on_cpu:
        return ModelChoice(path, 'fp32', 'GPU execution provider: the fp32 file')
    fast, why = int8_kernels(flags, machine)
    return ModelChoice(sibling if fast else path, 'int8' if fast else 'fp32', why)


def node_model_choice(path: str | os.PathLike, *, on_cpu: bool = True,
                      environ: Mapping[str, str] | None = None) -> ModelChoice:
    """The file the perception node runs for ``model_path`` = ``path``: :func:`choose_model_file` with the precision
    of ``STRING_PERCEPTION_MODEL_PRECISION`` (:func:`requested_precision`)."""
    return choose_model_file(path, requested_precision(environ), on_cpu=on_cpu)
