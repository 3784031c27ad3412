"""Domain randomisation of a compiled cell's appearance: surface colours and lights (no effect on physics).

``randomize_appearance(model, index, rng, strength)`` changes, in place:

- the colour of every static surface (table, floor, tray, table legs: geoms that are neither objects nor robot
  links): a random hue, saturation 0-0.6 and value 0.15-0.95, drawn per surface, written into the geom's
  material when it has one (textures are tinted) else into ``geom_rgba``;
- the robot links' colours: with probability 1/2 the cell's own, else one random grey level per arm part
  (real arms come in greys, black and white);
- the headlight (ambient 0.1-0.5, diffuse 0.1-0.45) and every directional light's direction (anywhere in the upper
  hemisphere, at least 25 deg above the horizon), diffuse intensity 0.1-0.6 and colour temperature (a warm / cool
  tint of up to 15 % per channel).

``strength`` in [0, 1] scales how far each draw may move from the cell's own appearance (0: unchanged; the draws
are still made so that a frame's other random choices do not depend on it). Objects keep their own random colours
(``objects.sample_objects``), and so do distractors (``own_colour_geom``, sim/distractors.py). MuJoCo reads
colours and lights from the model at every ``mjv_updateScene``, so the shared render context of the process
(``render.SceneRenderer``) needs no update.
"""
from __future__ import annotations

import colorsys

import mujoco
import numpy as np

__all__ = ['randomize_appearance']


def _random_rgb(rng: np.random.Generator) -> np.ndarray:
    h, s, v = rng.random(), 0.6 * rng.random(), 0.15 + 0.8 * rng.random()
    return np.array(colorsys.hsv_to_rgb(h, s, v))                              # [3]


def _blend(old: np.ndarray, new: np.ndarray, strength: float) -> np.ndarray:
    return (1.0 - strength) * old + strength * new


def randomize_appearance(model: mujoco.MjModel, arm_geom: np.ndarray, obj_geom: np.ndarray,
                         rng: np.random.Generator, strength: float = 1.0, own_colour_geom=()) -> None:
    """Randomise surfaces, arm colours and lights of ``model`` in place (see the module docstring).

    arm_geom: bool [ngeom], True for robot-link geoms; obj_geom: int [O] geom ids of the dropped objects;
    own_colour_geom: int [G] further geoms left alone, no draw made for them (the distractors of
    sim/distractors.py bring their own random colours, so ``rng`` makes the same draws with or without them)."""
    if not 0.0 <= strength <= 1.0:
        raise ValueError(f'strength must lie in [0, 1], got {strength}')
    is_obj = np.zeros(model.ngeom, bool)
    is_obj[np.asarray(obj_geom, int)] = True
    is_obj[np.asarray(own_colour_geom, int)] = True
    static = ~is_obj & ~np.asarray(arm_geom, bool)
    seen_mat: set[int] = set()
    for g in np.flatnonzero(static):                                          # surfaces: one colour each
        rgb = _random_rgb(rng)
        mat = int(model.geom_matid[g])
        if mat >= 0:
            if mat not in seen_mat:
                seen_mat.add(mat)
                model.mat_rgba[mat, :3] = _blend(model.mat_rgba[mat, :3], rgb, strength)
        else:
            model.geom_rgba[g, :3] = _blend(model.geom_rgba[g, :3], rgb, strength)
    if rng.random() < 0.5:                                                    # arm parts: keep, or greys
        for body in np.unique(model.geom_bodyid[np.flatnonzero(arm_geom)]):
            grey = np.full(3, 0.1 + 0.85 * rng.random())
            for g in np.flatnonzero(arm_geom & (model.geom_bodyid == body)):
                mat = int(model.geom_matid[g])
                if mat >= 0:
                    model.mat_rgba[mat, :3] = _blend(model.mat_rgba[mat, :3], grey, strength)
                model.geom_rgba[g, :3] = _blend(model.geom_rgba[g, :3], grey, strength)
    head = model.vis.headlight
    head.ambient[:] = _blend(np.asarray(head.ambient), np.full(3, 0.1 + 0.4 * rng.random()), strength)
    head.diffuse[:] = _blend(np.asarray(head.diffuse), np.full(3, 0.1 + 0.35 * rng.random()), strength)
    for light in range(model.nlight):
        elevation = np.radians(25.0 + 65.0 * rng.random())
        azimuth = 2.0 * np.pi * rng.random()
        direction = -np.array([np.cos(elevation) * np.cos(azimuth), np.cos(elevation) * np.sin(azimuth),
                               np.sin(elevation)])                            # [3] pointing down
        tint = 1.0 + 0.15 * (2.0 * rng.random() - 1.0) * np.array([1.0, 0.0, -1.0])   # warm / cool
        level = 0.1 + 0.5 * rng.random()
        model.light_dir[light] = _blend(model.light_dir[light], direction, strength)
        model.light_diffuse[light] = _blend(model.light_diffuse[light], level * tint, strength)
