"""ViT / ViTD model (torch, ROS-free): config, depth tokens, encoder, OWL-ViT-style heads, checkpoints.

    from string_perception.model import ViTDConfig, build_model, save_checkpoint, load_checkpoint
    model = build_model(ViTDConfig.preset('tiny'))
    out = model(image_uint8[B,H,W,3], depth_m[B,H,W], K[B,3,3])   # boxes, logits, embedding, tokens
"""
from .config import COORD_MODES, PRESETS, TRANSLATION_MODES, ViTDConfig
from .depth_tokens import DepthTokens, tokens_from_depth, fill_missing, pool_depth, valid_depth_mask
from .heads import BoxHead, ClassHead, PolicyHead
from .vit import Attention, Block, Encoder
from .vitd import ViTD, build_model, load_checkpoint, save_checkpoint

__all__ = ['ViTDConfig', 'PRESETS', 'COORD_MODES', 'TRANSLATION_MODES', 'ViTD', 'build_model',
           'save_checkpoint', 'load_checkpoint', 'Attention', 'Block', 'Encoder', 'BoxHead', 'ClassHead',
           'PolicyHead', 'DepthTokens', 'tokens_from_depth', 'pool_depth', 'fill_missing', 'valid_depth_mask']
