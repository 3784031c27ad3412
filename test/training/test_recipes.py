"""Recipes (config/recipes/*.yaml): each shipped model's recipe is the TrainConfig saved in its checkpoint, the CLI
reads them (flags override), and a malformed recipe is refused."""
from dataclasses import replace
from pathlib import Path

import pytest
pytest.importorskip('torch')  # optional: requirements/train.txt

from string_perception.training.checkpoint import load_training_checkpoint  # noqa: E402
from string_perception.training.config import TrainConfig, load_recipe  # noqa: E402
from string_perception.training.train import build_parser, config_from_args, resolve_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / 'config' / 'recipes'
# The shipped checkpoint -> the recipe of the run that wrote it.
SHIPPED = {'vitd_tiny_cayley.pt': 'vitd_tiny_cayley.yaml', 'vitd_workcell.pt': 'vitd_workcell_stage8b.yaml',
           'vitd_workcell_hr.pt': 'vitd_workcell_stage11.yaml'}
# Fields that name places on the machine that trained (absolute paths there, relative paths here), never a setting
# of the run: where it wrote, where it kept the frame cache, where the stage it started from lay.
MACHINE_PATHS = ('out', 'cache_file', 'init_from')


@pytest.mark.parametrize('checkpoint', sorted(SHIPPED))
def test_the_recipe_of_each_shipped_model_is_the_config_saved_in_it(checkpoint):
    saved = load_training_checkpoint(ROOT / 'models' / checkpoint)['train_config']
    fields = set(TrainConfig().to_dict())
    assert set(saved) <= fields, f'saved fields TrainConfig no longer has: {set(saved) - fields}'
    # Fields added to TrainConfig after the run are absent from the checkpoint: their defaults are what it ran with.
    want = TrainConfig.from_dict(saved).to_dict()
    got = load_recipe(RECIPES / SHIPPED[checkpoint]).to_dict()
    for name in sorted(fields - set(MACHINE_PATHS)):
        assert got[name] == want[name], f'{SHIPPED[checkpoint]}: {name} = {got[name]!r}, {checkpoint}: {want[name]!r}'
        assert type(got[name]) is type(want[name]), name
    for name in ('cache_file', 'init_from'):        # the same file, only in another place
        assert Path(got[name]).name == Path(want[name]).name, name


def test_workcell_stage1_recipe_is_the_model_card_command_line():
    """Stages 1 and 2 left no checkpoint in models/: stage 1's recipe is the card's command line, option for option,
    and each later stage starts from the one before."""
    argv = ['--preset', 'tiny', '--assignment', 'dense', '--model', 'patch_geometry=true', '--model',
            'image_size=[120,160]', '--scenes', 'mix', '--sim', 'appearance_randomization=1.0', '--sim',
            'object_depth_dropout=0.2', '--sim', 'object_split=train', '--sim', 'hfov_deg_range=[55,95]', '--sim',
            'camera_position_jitter_m=0.05', '--sim', 'camera_angle_jitter_deg=5', '--init-from',
            'models/vitd_tiny_cayley.pt', '--steps', '2000', '--batch-size', '16', '--lr', '3e-4', '--warmup-steps',
            '100', '--num-train-frames', '6000', '--num-workers', '2', '--val-frames', '48', '--val-every', '500',
            '--keep-every', '500', '--threads', '1', '--out', 'runs/wc1']
    assert load_recipe(RECIPES / 'vitd_workcell_stage1.yaml') == config_from_args(build_parser().parse_args(argv))
    stage2 = load_recipe(RECIPES / 'vitd_workcell_stage2.yaml')
    assert stage2.init_from == 'runs/wc1/ckpt_001000.pt'    # stage 2 starts where stage 1's recipe keeps a checkpoint
    stage3 = load_recipe(RECIPES / 'vitd_workcell_stage3.yaml')
    assert stage3.init_from == f'{stage2.out}/last.pt'      # stage 3 starts from stage 2's last weights
    stage4 = load_recipe(RECIPES / 'vitd_workcell_stage4.yaml')
    assert stage4.init_from == f'{stage3.out}/last.pt'      # stage 4 starts from stage 3's last weights
    stage5 = load_recipe(RECIPES / 'vitd_workcell_stage5.yaml')
    assert stage5.init_from == f'{stage4.out}/last.pt'      # stage 5 starts from stage 4's last weights
    stage6 = load_recipe(RECIPES / 'vitd_workcell_stage6.yaml')
    assert stage6.init_from == f'{stage5.out}/last.pt'      # stage 6 starts from stage 5's last weights ...
    assert stage6.cache_file == stage5.cache_file and stage6.num_train_frames == stage5.num_train_frames  # ... frames
    stage7 = load_recipe(RECIPES / 'vitd_workcell_stage7.yaml')
    assert stage7.init_from == f'{stage6.out}/last.pt'      # stage 7 starts from stage 6's last weights ...
    assert stage7.train_offset == stage6.train_offset + stage6.num_train_frames  # ... on seeds after stages 5-6's
    stage8 = load_recipe(RECIPES / 'vitd_workcell_stage8.yaml')
    assert stage8.init_from == f'{stage7.out}/last.pt'      # stage 8 starts from stage 7's last weights ...
    assert stage8.train_offset == stage7.train_offset + stage7.num_train_frames    # ... on seeds no stage saw
    assert stage8.cache_file != stage7.cache_file
    stage8b = load_recipe(RECIPES / 'vitd_workcell_stage8b.yaml')
    assert stage8b == replace(stage8, loss_overrides={'class_weights': {'object': 0.5}}, out='runs/wc8b')  # one change
    stage9 = load_recipe(RECIPES / 'vitd_workcell_stage9.yaml')
    assert stage9.init_from == f'{stage8b.out}/last.pt'     # stage 9 starts from stage 8b's last weights ...
    assert stage9.train_offset == stage8.train_offset + stage8.num_train_frames    # ... on seeds no stage saw
    assert stage9.model_overrides == {**stage8b.model_overrides, 'image_size': [240, 320]}   # the one change ...
    assert stage9.render_scale == stage8b.render_scale == 2         # ... frames brought to it as the node does
    assert replace(stage9, model_overrides=stage8b.model_overrides, init_from=stage8b.init_from,
                   train_offset=stage8b.train_offset, num_train_frames=stage8b.num_train_frames, seed=stage8b.seed,
                   steps=stage8b.steps, val_every=stage8b.val_every, keep_every=stage8b.keep_every,
                   cache_file=stage8b.cache_file, out=stage8b.out) == stage8b   # the loss, lr, sim settings: 8b's
    stage10 = load_recipe(RECIPES / 'vitd_workcell_stage10.yaml')
    assert stage10.init_from == f'{stage9.out}/last.pt'     # stage 10 starts from stage 9's last weights ...
    assert stage10.train_offset == stage9.train_offset + stage9.num_train_frames    # ... on seeds no stage saw
    assert replace(stage10, init_from=stage9.init_from, train_offset=stage9.train_offset, seed=stage9.seed,
                   steps=stage9.steps, val_every=stage9.val_every, keep_every=stage9.keep_every,
                   cache_file=stage9.cache_file, out=stage9.out) == stage9     # the one change: more of stage 9
    stage11 = load_recipe(RECIPES / 'vitd_workcell_stage11.yaml')
    assert stage11.init_from == f'{stage10.out}/last.pt'    # stage 11 starts from stage 10's last weights ...
    assert stage11.train_offset == stage10.train_offset + stage10.num_train_frames  # ... on seeds no stage saw
    assert replace(stage11, init_from=stage10.init_from, train_offset=stage10.train_offset, seed=stage10.seed,
                   cache_file=stage10.cache_file, out=stage10.out) == stage10   # the one change: more of stage 10


def test_cli_reads_the_recipe_and_flags_override_it(tmp_path):
    recipe = RECIPES / 'vitd_workcell_stage2.yaml'
    args = build_parser().parse_args(['--recipe', str(recipe), '--steps', '7', '--sim', 'object_split=heldout',
                                      '--out', str(tmp_path / 'run')])
    cfg, resume = resolve_config(args)
    base = load_recipe(recipe)
    assert resume is None and cfg.steps == 7 and cfg.out == str(tmp_path / 'run')
    assert cfg.sim_overrides == {**base.sim_overrides, 'object_split': 'heldout'}    # merged, not replaced
    assert cfg.lr == base.lr == 2e-4 and cfg.render_scale == 2 and cfg.model_overrides == base.model_overrides
    cfg, resume = resolve_config(build_parser().parse_args(['--recipe', str(recipe), '--resume', 'auto']))
    assert resume is None and cfg == base          # auto without OUT/last.pt (the recipe's out): a fresh run


def test_a_malformed_recipe_is_refused(tmp_path):
    bad = tmp_path / 'bad.yaml'
    bad.write_text('steps: 10\nlearning_rate: 0.1\n')
    with pytest.raises(ValueError, match='learning_rate'):
        load_recipe(bad)
    bad.write_text('lr: 2e-4\n')                   # YAML 1.1: a string, not a float
    with pytest.raises(ValueError, match='lr must be float'):
        load_recipe(bad)
    bad.write_text('lr: 2.0e-4\nsteps: 10\n')
    assert load_recipe(bad) == TrainConfig(lr=2e-4, steps=10)


@pytest.mark.parametrize('card, recipes', [('MODEL_CARD.md', ['vitd_tiny_cayley.yaml']),
                                           ('MODEL_CARD_workcell.md', ['vitd_workcell_stage1.yaml',
                                                                       'vitd_workcell_stage2.yaml',
                                                                       'vitd_workcell_stage3.yaml',
                                                                       'vitd_workcell_stage4.yaml',
                                                                       'vitd_workcell_stage5.yaml',
                                                                       'vitd_workcell_stage6.yaml',
                                                                       'vitd_workcell_stage7.yaml',
                                                                       'vitd_workcell_stage8.yaml',
                                                                       'vitd_workcell_stage8b.yaml',
                                                                       'vitd_workcell_stage9.yaml',
                                                                       'vitd_workcell_stage10.yaml',
                                                                       'vitd_workcell_stage11.yaml'])])
def test_model_cards_cite_their_recipes(card, recipes):
    text = (ROOT / 'models' / card).read_text()
    for name in recipes:
        assert f'config/recipes/{name}' in text and (RECIPES / name).is_file()
