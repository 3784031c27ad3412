"""Offscreen MuJoCo rendering (MUJOCO_GL=osmesa without a GPU): colour + metric z-depth in one pass, geom-id
segmentation, and per-object 'alone' silhouettes for the visibility fraction.

One GL context per process (made on first use; contexts do not survive fork). Making a MuJoCo render context
uploads every mesh (the arms: ~40% of a frame's CPU time at 128x128), so a context is kept per process and
`cache_key` and reused for the next model with the same mesh count and offscreen size; only `slot_meshes` (the
per-frame object meshes) are uploaded again. Viewports smaller than the offscreen buffer are rendered and read
back, so one context serves several image sizes.
"""
from __future__ import annotations

import os

os.environ.setdefault('MUJOCO_GL', 'osmesa')

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

_GL: dict = {}
_CONTEXTS: dict = {}     # (pid, cache_key) -> (MjrContext, nmesh, offwidth, offheight)


def _gl_class():
    """The GLContext class of MUJOCO_GL (default osmesa), imported directly: `import mujoco` picks its default
    backend when first imported, possibly before this module set MUJOCO_GL."""
    backend = os.environ.get('MUJOCO_GL', 'osmesa').lower()
    if backend == 'osmesa':
        from mujoco.osmesa import GLContext
    elif backend == 'egl':
        from mujoco.egl import GLContext
    elif backend == 'glfw':
        from mujoco.glfw import GLContext
    else:
        raise RuntimeError(f'MUJOCO_GL={backend!r}: expected osmesa (no GPU, libosmesa6), egl or glfw')
    return GLContext


def _gl_context(width: int, height: int):
    """The process's GL context, grown when a larger buffer is needed."""
    key = os.getpid()
    ctx = _GL.get(key)
    if ctx is None or ctx[1] < width or ctx[2] < height:
        if ctx is not None:
            ctx[0].free()
        w, h = max(width, 640), max(height, 480)
        gl = _gl_class()(w, h)
        ctx = (gl, w, h)
        _GL[key] = ctx
    ctx[0].make_current()
    return ctx[0]


class SceneRenderer:
    """Renders one compiled model through its camera `cam_id`; the model's offscreen buffer bounds the size."""

    def __init__(self, model: mujoco.MjModel, cam_id: int, cache_key: str | None = None, slot_meshes=()):
        self.model = model
        size = (model.vis.global_.offwidth, model.vis.global_.offheight)
        _gl_context(*size)
        self.scene = mujoco.MjvScene(model, maxgeom=2000)
        self.option = mujoco.MjvOption()
        self.pert = mujoco.MjvPerturb()
        self.camera = mujoco.MjvCamera()
        self.camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self.camera.fixedcamid = cam_id
        self.cache_key = cache_key
        cached = _CONTEXTS.get((os.getpid(), cache_key)) if cache_key is not None else None
        if cached is not None and cached[1:] == (model.nmesh, *size):
            self.context = cached[0]
            for mesh_id in slot_meshes:
                mujoco.mjr_uploadMesh(model, self.context, int(mesh_id))
        else:
            if cached is not None:
                cached[0].free()
            self.context = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_50)
            if cache_key is not None:
                _CONTEXTS[(os.getpid(), cache_key)] = (self.context, model.nmesh, *size)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self.context)

    def close(self) -> None:
        """Free the render context unless it is kept for the next frame."""
        if self.cache_key is None:
            self.context.free()

    def _draw(self, data, height: int, width: int, segment: bool):
        mujoco.mjv_updateScene(self.model, data, self.option, self.pert, self.camera, mujoco.mjtCatBit.mjCAT_ALL,
                               self.scene)
        self.scene.flags[mujoco.mjtRndFlag.mjRND_SEGMENT] = segment
        self.scene.flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = segment
        viewport = mujoco.MjrRect(0, 0, width, height)
        mujoco.mjr_render(viewport, self.scene, self.context)
        return viewport

    def color_depth(self, data, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
        """(rgb uint8[H,W,3], z-depth float64[H,W] metres, inf where nothing is hit), row 0 = image top."""
        viewport = self._draw(data, height, width, segment=False)
        rgb = np.empty((height, width, 3), np.uint8)
        zbuf = np.empty((height, width), np.float32)
        mujoco.mjr_readPixels(rgb, zbuf, viewport, self.context)
        extent = self.model.stat.extent
        near, far = self.model.vis.map.znear * extent, self.model.vis.map.zfar * extent
        z = near / (1.0 - zbuf.astype(np.float64) * (1.0 - near / far))              # [H,W] linear depth
        z[zbuf >= 1.0] = np.inf
        return np.flipud(rgb).copy(), np.flipud(z).copy()

    def geom_ids(self, data, height: int, width: int) -> np.ndarray:
        """int32[H,W] id of the geom seen at each pixel, -1 for none (or a non-geom)."""
        viewport = self._draw(data, height, width, segment=True)
        img = np.empty((height, width, 3), np.uint8)
        mujoco.mjr_readPixels(img, None, viewport, self.context)
        seg = img[..., 0].astype(np.int32) + (img[..., 1].astype(np.int32) << 8) + (img[..., 2].astype(np.int32) << 16)
        n = self.scene.ngeom
        lut = np.full(n + 1, -1, np.int32)                                             # segid + 1 -> geom id
        for g in self.scene.geoms[:n]:
            if g.segid >= 0 and g.objtype == mujoco.mjtObj.mjOBJ_GEOM:
                lut[g.segid + 1] = g.objid
        seg[seg > n] = 0
        return np.flipud(lut[seg]).copy()

    def geom_ids_only(self, data, height: int, width: int, geoms) -> np.ndarray:
        """Like geom_ids with only `geoms` drawn (the others hidden through an unused geom group)."""
        groups = self.model.geom_group.copy()
        flags = self.option.geomgroup.copy()
        try:
            self.model.geom_group[geoms] = 5
            self.option.geomgroup[:] = 0
            self.option.geomgroup[5] = 1
            return self.geom_ids(data, height, width)
        finally:
            self.model.geom_group[:] = groups
            self.option.geomgroup[:] = flags
