"""Class list of simulated frames: the procedural generator's five primitives plus one generic mesh class.

Mesh objects (pybullet_data's random_urdfs blobs and the mug) share one class, ``object``: they have no common
shape a primitive name would describe, and a robot-learning user wants "something graspable here" with an
oriented box, not a category the data cannot support (a thousand random blobs, one mug). The index is appended
after the primitives so that labels 0-4 keep their meaning; a model trained on simulated frames with mesh objects
uses ``SIM_CLASS_NAMES`` as its ``class_names`` (config and ONNX metadata).
"""
from __future__ import annotations

from string_perception.scenes import CLASS_NAMES

OBJECT_CLASS = 'object'
SIM_CLASS_NAMES: tuple[str, ...] = tuple(CLASS_NAMES) + (OBJECT_CLASS,)
OBJECT = len(CLASS_NAMES)
