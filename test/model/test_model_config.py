"""ViTDConfig: JSON round trip, presets, validation."""
import json

import pytest

pytest.importorskip('torch')  # optional: requirements/train.txt
from string_perception.model import PRESETS, ViTDConfig, build_model  # noqa: E402


def test_default_round_trip_through_json():
    cfg = ViTDConfig(encoding='rope_mixed', encoding_kwargs={'base': 10.0}, class_names=('a', 'b'),
                     coord_mode='camera_xyz', abs_pos_embed=True)
    d = cfg.to_dict()
    assert isinstance(d['image_size'], list) and isinstance(d['class_names'], list)
    back = ViTDConfig.from_dict(json.loads(json.dumps(d)))
    assert back == cfg
    assert back.to_dict() == d


@pytest.mark.parametrize('name', sorted(PRESETS))
def test_presets_round_trip(name):
    cfg = ViTDConfig.preset(name)
    assert ViTDConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_preset_shapes():
    tiny, base = ViTDConfig.preset('tiny'), ViTDConfig.preset('base')
    assert tiny.image_size == (128, 128) and tiny.patch_size == 8 and tiny.num_tokens == 256
    assert (tiny.width, tiny.depth, tiny.num_heads) == (128, 6, 4)
    assert (base.width, base.depth, base.num_heads, base.patch_size) == (768, 12, 12, 16)
    assert base.image_size == (224, 224) and base.head_dim == 64
    assert ViTDConfig.preset('tiny', encoding='rope', use_depth=False).coord_dim == 2
    assert tiny.coord_dim == 3


def test_tiny_parameter_count():
    n = build_model(ViTDConfig.preset('tiny', encoding='rope_mixed')).num_parameters()
    assert 0.8e6 < n < 2.5e6, n   # a few MB checkpoint


def test_abs_pos_embed_auto():
    assert ViTDConfig(encoding='none').use_abs_pos_embed
    assert not ViTDConfig(encoding='rope').use_abs_pos_embed
    assert not ViTDConfig(encoding='none', abs_pos_embed=False).use_abs_pos_embed


@pytest.mark.parametrize('bad', [
    dict(image_size=(100, 128)),                 # not a multiple of the patch
    dict(image_size=(128,)),
    dict(patch_size=0),
    dict(width=130, num_heads=4),                # not divisible
    dict(width=12, num_heads=4),                 # odd head dim
    dict(depth=0),
    dict(mlp_ratio=0.0),
    dict(encoding='nope'),
    dict(coord_mode='xyz'),
    dict(translation_mode='relative'),
    dict(policy_pool='max'),
    dict(depth_range=(2.0, 1.0)),
    dict(depth_range=(-1.0, 1.0)),
    dict(depth_range=(0.1, float('inf'))),
    dict(depth_fill=0.0),
    dict(nominal_depth=-1.0),
    dict(size_prior=0.0),
    dict(depth_scale_init=0.0),
    dict(class_prior_prob=1.0),
    dict(class_names=()),
    dict(class_names=('a', 'a')),
    dict(class_names='box'),
    dict(std=(0.2, 0.0, 0.2)),
    dict(abs_pos_embed='yes'),
    dict(embed_dim=0),
])
def test_bad_config_raises(bad):
    with pytest.raises(ValueError):
        ViTDConfig(**bad)


def test_from_dict_rejects_unknown_keys_and_bad_presets():
    d = ViTDConfig().to_dict()
    d['widht'] = 3
    with pytest.raises(ValueError, match='widht'):
        ViTDConfig.from_dict(d)
    with pytest.raises(ValueError):
        ViTDConfig.preset('huge')
