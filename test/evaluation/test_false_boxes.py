"""evaluation.false_boxes: pixel roles from a segmentation, and what a box holds, on hand-made frames."""
import numpy as np

from string_perception import box_ops
from string_perception.evaluation import false_boxes as fb

# geoms: 0 table, 1 arm link, 2 object 0 (labelled), 3 object 1 (unlabelled), 4 distractor
GEOM_OBJ = np.array([-1, -1, 0, 1, -1])
LABEL_INDEX = np.array([0, -1])
ARM = np.array([False, True, False, False, False])
DISTRACTOR = np.array([4])
K = np.array([[100.0, 0.0, 10.0], [0.0, 100.0, 5.0], [0.0, 0.0, 1.0]])


def test_pixel_roles_follow_the_segmentation():
    seg = np.array([[0, 1, 2, 3, 4, -1]])
    roles = fb.pixel_roles(seg, GEOM_OBJ, LABEL_INDEX, ARM, DISTRACTOR)
    assert roles.tolist() == [[fb.STRUCTURE, fb.ROBOT, fb.LABELLED, fb.UNLABELLED, fb.DISTRACTOR, fb.BACKGROUND]]
    no_objects = fb.pixel_roles(np.array([[0, 1, -1]]), np.full(2, -1), np.zeros(0, int), ARM[:2], np.zeros(0, int))
    assert no_objects.tolist() == [[fb.STRUCTURE, fb.ROBOT, fb.BACKGROUND]]        # a cell with nothing dropped


def test_a_box_counts_the_surface_points_inside_it():
    """A 20x10 frame: the left half a wall 1 m away (structure), the right half an arm link 2 m away. A box around the
    wall's left columns holds only wall pixels; one 2 m away on the right only arm pixels; one in mid-air none."""
    seg = np.zeros((10, 20), int)
    seg[:, 10:] = 1
    z = np.where(seg == 0, 1.0, 2.0)
    z[0, 0] = np.nan                                                        # no depth there: never counted
    roles = fb.pixel_roles(seg, GEOM_OBJ, LABEL_INDEX, ARM, DISTRACTOR)
    # pixel u maps to x = (u - 10) z / 100: the box's x in [-0.105, -0.055] holds columns 0-4 at 1 m (x -0.10 to
    # -0.06); rows (y -0.05 to 0.04) all inside
    wall = box_ops.encode_box_params(np.array([-0.08, 0.0, 1.0]), np.eye(3), np.array([0.05, 0.2, 0.05]))
    arm = box_ops.encode_box_params(np.array([0.1, 0.0, 2.0]), np.eye(3), np.array([0.1, 0.2, 0.05]))
    air = box_ops.encode_box_params(np.array([0.0, 0.0, 1.5]), np.eye(3), np.array([0.1, 0.1, 0.1]))
    counts = fb.box_role_counts(np.stack([wall, arm, air]), z, K, roles, grow=0.0)
    assert counts[0, fb.STRUCTURE] == 5 * 10 - 1 and counts[0].sum() == counts[0, fb.STRUCTURE]   # NaN pixel left out
    # arm pixels at 2 m: x = (u - 10) * 0.02 for u = 10..19 -> 0 .. 0.18; the box holds x in [0.05, 0.15]: u 13..17
    assert counts[1, fb.ROBOT] == 5 * 10 and counts[1].sum() == counts[1, fb.ROBOT]
    assert counts[2].sum() == 0
    assert fb.box_roles(counts).tolist() == [fb.STRUCTURE, fb.ROBOT, fb.EMPTY]


def test_growing_a_box_takes_in_the_surface_it_nearly_touches():
    seg, z = np.zeros((10, 20), int), np.ones((10, 20))
    roles = fb.pixel_roles(seg, GEOM_OBJ, LABEL_INDEX, ARM, DISTRACTOR)
    floating = box_ops.encode_box_params(np.array([0.0, 0.0, 0.9]), np.eye(3), np.array([0.1, 0.1, 0.18]))
    assert fb.box_role_counts(floating[None], z, K, roles, grow=0.0).sum() == 0          # ends 1 cm short of the wall
    assert fb.box_role_counts(floating[None], z, K, roles, grow=0.1)[0, fb.STRUCTURE] > 0
