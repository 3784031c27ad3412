"""Behaviour cloning on the simulated ALOHA transfer-cube cell (issue 23), torch: a chunking policy conditioned on
the ViTD encoder's policy embedding (config.py, model.py, data.py, train_bc.py, export.py).

Nothing in runtime/ or ros/ imports this package: a trained policy is deployed as two ONNX files (export.py) that
runtime.OnnxModel and runtime.PolicyModel run (sim/demos/rollout.OnnxActor, the ROS policy node).
"""
from .config import PolicyConfig
from .model import BCPolicy, ChunkHead

__all__ = ['BCPolicy', 'ChunkHead', 'PolicyConfig']
