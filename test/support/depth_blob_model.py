"""A stand-in for the detector that measures what it sees (no network): the runtime's geometry (windows, mirrored
inputs, intrinsics) is right only if its boxes come out where the object is."""
from types import SimpleNamespace

import numpy as np

__all__ = ['K640', 'DepthBlobModel', 'blob_scene']

K640 = np.array([[600.0, 0.0, 319.5], [0.0, 600.0, 239.5], [0.0, 0.0, 1.0]])


class DepthBlobModel:
    """A stand-in for the model that measures what it sees: every token over the near region (0 < depth < 1.5 m)
    gives one box whose centre is the back-projection (with the intrinsics it is given) of the region's extent's
    centre at the region's mean depth and whose x/y size is that extent in metres (z: 5 cm); logit 3 there,
    -10 elsewhere. So a window's box equals the full frame's only if the window's intrinsics are right, and an
    object cut by a window border gives a truncated box."""

    labels = ('cube',)
    provider = 'fake'
    path = 'depth_blob'
    _static_batch = None

    def __init__(self, input_hw=(120, 160), patch=8):
        self.input_hw, self.patch = input_hw, patch
        self.metadata = SimpleNamespace(patch_size=patch)

    def run(self, image, depth, intrinsics):
        B, H, W = depth.shape
        p = self.patch
        N = (H // p) * (W // p)
        boxes = np.zeros((B, N, 12), np.float32)
        boxes[..., 2], boxes[..., 3], boxes[..., 7], boxes[..., 9:12] = 3.0, 1.0, 1.0, 0.05   # far, identity
        logits = np.full((B, N, 1), -10.0, np.float32)
        for b in range(B):
            near = (depth[b] > 0) & (depth[b] < 1.5)                                     # [H,W]
            if not near.any():
                continue
            v, u = np.nonzero(near)
            z = float(depth[b][near].mean())
            K = intrinsics[b].astype(np.float64)
            uc, vc = (u.min() + u.max()) / 2, (v.min() + v.max()) / 2
            tok = near.reshape(H // p, p, W // p, p).any(axis=(1, 3)).reshape(-1)      # [N]
            boxes[b, tok, 0] = (uc - K[0, 2]) * z / K[0, 0]
            boxes[b, tok, 1] = (vc - K[1, 2]) * z / K[1, 1]
            boxes[b, tok, 2] = z
            boxes[b, tok, 9] = (u.max() - u.min() + 1) * z / K[0, 0]
            boxes[b, tok, 10] = (v.max() - v.min() + 1) * z / K[1, 1]
            logits[b, tok, 0] = 3.0
        return {'boxes': boxes, 'logits': logits, 'embedding': np.zeros((B, 4), np.float32)}


def blob_scene(x0, x1, y0, y1):
    """A 640x480 frame: background at 2 m, a near object (1 m) over columns x0..x1-1 and rows y0..y1-1."""
    rgb = np.full((480, 640, 3), 128, np.uint8)
    depth = np.full((480, 640), 2000, np.uint16)
    depth[y0:y1, x0:x1] = 1000
    truth_t = np.array([((x0 + x1 - 1) / 2 - K640[0, 2]) / 600.0, ((y0 + y1 - 1) / 2 - K640[1, 2]) / 600.0, 1.0])
    truth_size = np.array([(x1 - x0) / 600.0, (y1 - y0) / 600.0, 0.05])
    return (rgb, depth, K640), truth_t, truth_size
