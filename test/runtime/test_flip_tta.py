"""runtime/flip_tta.py and Pipeline(flip_tta=True): the mirror's geometry, the per-token fusion, and the pipeline."""
import numpy as np
import pytest

from string_perception import box_ops
from string_perception.iou3d import paired_box3d_iou
from string_perception.runtime import Pipeline, prepare_inputs
from string_perception.runtime.flip_tta import (MIRROR, flip_inputs, fuse_boxes, fuse_flip_passes, mirror_boxes,
                                                mirrored_token_order, nearest_rotation)
from string_perception.runtime.tiling import TilingConfig
from string_perception.training.inference import detections_to_arrays
from test.support.depth_blob_model import DepthBlobModel, blob_scene
from test.support.tiny_model import save_tiny_model

CPU_ONLY = ('CPUExecutionProvider',)
CUBE = box_ops.box_symmetries()                                                  # [24,3,3]


def _random_boxes(n, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.normal(size=(n, 3)) + [0, 0, 2]                                      # [n,3]
    R = np.linalg.qr(rng.normal(size=(n, 3, 3)))[0]                              # [n,3,3] orthogonal
    R *= np.sign(np.linalg.det(R))[:, None, None]                               # det +1
    return box_ops.encode_box_params(t, R, rng.uniform(0.02, 0.3, (n, 3)))       # [n,12]


def _backproject(K, u, v, z):
    return np.array([(u - K[0, 2]) * z / K[0, 0], (v - K[1, 2]) * z / K[1, 1], z])


def test_the_mirrored_input_images_the_mirrored_scene():
    rgb = np.random.default_rng(0).integers(0, 256, (120, 160, 3), dtype=np.uint8)
    depth = np.random.default_rng(1).integers(400, 3000, (120, 160)).astype(np.uint16)
    K = np.array([[150.0, 0, 71.3], [0, 150.0, 62.0], [0, 0, 1]])               # cx off centre on purpose
    x = prepare_inputs(rgb, depth, K, (120, 160))
    f = flip_inputs(x)
    Kx, Kf = x.intrinsics[0].astype(float), f.intrinsics[0].astype(float)
    for u, v in ((0, 0), (17, 40), (159, 119)):
        assert f.depth[0, v, 159 - u] == x.depth[0, v, u]
        np.testing.assert_array_equal(f.image[0, v, 159 - u], x.image[0, v, u])
        z = float(x.depth[0, v, u])                                              # the same point, mirrored
        np.testing.assert_allclose(_backproject(Kf, 159 - u, v, z), MIRROR @ _backproject(Kx, u, v, z), atol=1e-5)
    np.testing.assert_array_equal(flip_inputs(f).image, x.image)                 # an involution
    np.testing.assert_allclose(flip_inputs(f).intrinsics, x.intrinsics)


def test_token_order_and_box_mirror_are_involutions_and_mirror_the_corners():
    order = mirrored_token_order((3, 4))
    np.testing.assert_array_equal(order.reshape(3, 4)[0], [3, 2, 1, 0])          # row-major, each row reversed
    np.testing.assert_array_equal(order[order], np.arange(12))
    b = _random_boxes(6)
    m = mirror_boxes(b)
    np.testing.assert_allclose(mirror_boxes(m), b, atol=1e-12)
    t, R, s = box_ops.decode_box_params(m)
    assert np.allclose(np.linalg.det(R), 1.0)                                    # still a rotation
    want = box_ops.box_corners(*box_ops.decode_box_params(b)) @ MIRROR           # [6,8,3] the corners reflected
    got = box_ops.box_corners(t, R, s)
    for w, g in zip(want, got):                                                  # the same 8 points, other order
        np.testing.assert_allclose(np.sort(w, axis=0), np.sort(g, axis=0), atol=1e-12)


def test_nearest_rotation_is_the_chordal_mean_and_right_equivariant():
    b = _random_boxes(5, seed=1)
    R = box_ops.decode_box_params(b)[1]
    np.testing.assert_allclose(nearest_rotation(R), R, atol=1e-12)              # a rotation is its own nearest
    c = np.cos(np.radians(20)), np.sin(np.radians(20))
    Rz = np.array([[c[0], -c[1], 0], [c[1], c[0], 0], [0, 0, 1]])
    half = np.array([[np.cos(np.radians(10)), -np.sin(np.radians(10)), 0],
                     [np.sin(np.radians(10)), np.cos(np.radians(10)), 0], [0, 0, 1]])
    np.testing.assert_allclose(nearest_rotation(0.5 * (np.eye(3) + Rz)), half, atol=1e-12)   # halfway
    A = 0.5 * (R + box_ops.decode_box_params(_random_boxes(5, seed=2))[1])
    np.testing.assert_allclose(nearest_rotation(A @ R), nearest_rotation(A) @ R, atol=1e-9)


def test_fusing_a_box_with_itself_in_any_labelling_gives_that_box():
    b = _random_boxes(24, seed=3)
    t, R, s = box_ops.decode_box_params(b)
    relabelled = box_ops.encode_box_params(t, R @ CUBE, np.einsum('nji,nj->ni', np.abs(CUBE), s))  # 24 labellings
    np.testing.assert_allclose(paired_box3d_iou(box_ops.as_boxes(relabelled), box_ops.as_boxes(b)), 1.0, atol=1e-6)
    np.testing.assert_allclose(fuse_boxes(b, relabelled), b, atol=1e-9)           # relabelled back, then equal
    shifted = box_ops.encode_box_params(t + [0.1, -0.2, 0.3], R, 2 * s)
    f = box_ops.decode_box_params(fuse_boxes(b, shifted))
    np.testing.assert_allclose(f[0], t + [0.05, -0.1, 0.15], atol=1e-12)          # the midpoint
    np.testing.assert_allclose(f[2], 1.5 * s, atol=1e-12)                         # the mean size
    fa = box_ops.as_boxes(fuse_boxes(b[:1], relabelled[5:6]))                     # which pass is 'a' is no matter
    fb = box_ops.as_boxes(fuse_boxes(relabelled[5:6], b[:1]))
    np.testing.assert_allclose(paired_box3d_iou(fa, fb), 1.0, atol=1e-6)


def test_fuse_flip_passes_fuses_passes_0_and_1_and_keeps_the_rest():
    gh, gw, C = 2, 3, 2
    n = gh * gw
    rng = np.random.default_rng(4)
    boxes = np.stack([_random_boxes(n, seed=s) for s in (5, 6, 7)]).astype(np.float32)     # [3,n,12]
    boxes[1] = mirror_boxes(boxes[0])[mirrored_token_order((gh, gw))]            # pass 1 = pass 0 seen mirrored
    logits = rng.normal(size=(3, n, C)).astype(np.float32)                       # [3,n,C]
    emb = rng.normal(size=(3, 4)).astype(np.float32)
    out = fuse_flip_passes({'boxes': boxes, 'logits': logits, 'embedding': emb}, (gh, gw))
    assert out['boxes'].shape == (2, n, 12) and out['logits'].shape == (2, n, C) and out['embedding'].shape == (2, 4)
    np.testing.assert_allclose(out['boxes'][0], boxes[0], atol=1e-5)            # the same boxes, fused = themselves
    np.testing.assert_allclose(out['logits'][0], 0.5 * (logits[0] + logits[1][mirrored_token_order((gh, gw))]))
    np.testing.assert_array_equal(out['boxes'][1], boxes[2])
    np.testing.assert_array_equal(out['embedding'], emb[[0, 2]])
    with pytest.raises(ValueError, match='passes'):
        fuse_flip_passes({'boxes': boxes[:1], 'logits': logits[:1]}, (gh, gw))


def test_a_mirror_equivariant_model_gives_the_same_box_with_and_without_flip():
    """The depth-blob stand-in measures the object with the intrinsics it is given: with a wrong cx, token order or
    box mirror, the flipped pass's box (or score) would land elsewhere and the fused box would move."""
    for x0, x1 in ((0, 60), (250, 330), (580, 640)):                             # at the left edge, centre, right edge
        frame, t, size = blob_scene(x0, x1, 200, 260)
        plain = Pipeline('blob', model=DepthBlobModel(), score_threshold=0.3).__call__(*frame).detections
        flip = Pipeline('blob', model=DepthBlobModel(), score_threshold=0.3, flip_tta=True)(*frame).detections
        assert len(plain) == len(flip) == 1
        np.testing.assert_allclose(flip.translations, plain.translations, atol=1e-6)
        np.testing.assert_allclose(flip.sizes, plain.sizes, atol=1e-6)
        np.testing.assert_allclose(flip.scores, plain.scores, atol=1e-6)
        np.testing.assert_allclose(flip.translations[0], t, atol=0.006)


@pytest.fixture(scope='module')
def tiny_path(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp('models') / 'tiny.onnx', logit_bias=3.0, tokens=True)


def _frame(seed, h=96, w=128):
    rng = np.random.default_rng(seed)
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)                       # [h,w,3]
    depth = rng.integers(500, 3000, (h, w)).astype(np.uint16)                    # [h,w] mm
    K = np.array([[200.0, 0, (w - 1) / 2 + 3.0], [0, 200.0, (h - 1) / 2], [0, 0, 1]])
    return rgb, depth, K


def _mirrored(frame):
    rgb, depth, K = frame
    Km = K.copy()
    Km[0, 2] = (rgb.shape[1] - 1) - K[0, 2]
    return np.ascontiguousarray(rgb[:, ::-1]), np.ascontiguousarray(depth[:, ::-1]), Km


def test_flip_tta_detections_are_mirror_equivariant_with_a_real_network(tiny_path):
    """Whatever the network, flip TTA sees the frame and its mirror image and averages them symmetrically, so the
    detections of the mirrored frame are the frame's detections mirrored."""
    pipe = Pipeline(tiny_path, CPU_ONLY, score_threshold=0.05, flip_tta=True, intra_op_threads=1)
    for seed in range(2):
        frame = _frame(seed)
        a = detections_to_arrays(pipe(*frame).detections)
        b = detections_to_arrays(pipe(*_mirrored(frame)).detections)
        assert len(a['params']) > 0 and len(a['params']) == len(b['params'])
        np.testing.assert_allclose(a['scores'], b['scores'], rtol=1e-5)
        np.testing.assert_array_equal(a['labels'], b['labels'])
        iou = paired_box3d_iou(box_ops.as_boxes(a['params']), box_ops.as_boxes(mirror_boxes(b['params'])))
        np.testing.assert_allclose(iou, 1.0, atol=1e-4)


def test_flip_tta_run_batch_tiling_and_live_switch(tiny_path):
    pipe = Pipeline(tiny_path, CPU_ONLY, score_threshold=0.05, flip_tta=True, intra_op_threads=1)
    frames = [_frame(s) for s in range(3)]
    for frame, res in zip(frames, pipe.run_batch(frames, batch_size=4)):         # = one call per frame
        one = pipe(*frame)
        np.testing.assert_allclose(res.detections.translations, one.detections.translations, rtol=1e-5, atol=1e-6)
    plain = Pipeline(tiny_path, CPU_ONLY, score_threshold=0.05, intra_op_threads=1)
    r, ref = pipe(*frames[0]), plain(*frames[0])
    np.testing.assert_allclose(r.embedding, ref.embedding, rtol=1e-5, atol=1e-6)  # the original pass's
    np.testing.assert_allclose(r.tokens, ref.tokens, rtol=1e-5, atol=1e-6)
    assert not np.allclose(r.detections.translations, ref.detections.translations)   # the fusion moved the boxes
    pipe.set_params(flip_tta=False)                                              # live off: the plain pipeline
    np.testing.assert_allclose(pipe(*frames[0]).detections.translations, ref.detections.translations, atol=1e-6)
    tiled = Pipeline(tiny_path, CPU_ONLY, score_threshold=0.05, flip_tta=True, tiling=TilingConfig(),
                     intra_op_threads=1)
    t = tiled(*frames[0])
    n = (32 // 8) * (48 // 8)
    assert t.tokens.shape[0] == 5 * n                                           # full frame (fused) + 4 windows
    whole = Pipeline(tiny_path, CPU_ONLY, score_threshold=0.05, flip_tta=True,
                     tiling=TilingConfig(full_frame_boxes=True), intra_op_threads=1)
    assert len(whole(*frames[0]).detections) > 0
