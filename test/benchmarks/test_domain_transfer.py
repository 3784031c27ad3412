"""benchmarks/domain_transfer.py: the training command of a source and the page rendered from saved results."""
import pytest  # noqa: E402
pytest.importorskip('torch')  # optional: requirements/train.txt
from benchmarks import domain_transfer as dt  # noqa: E402
from string_perception.training.train import build_parser, config_from_args  # noqa: E402


def test_every_source_trains_with_the_shipped_recipe_and_primitive_only_frames(tmp_path):
    budget = dt.Budget(steps=30, batch_size=4, train_frames=12, val_frames=2, val_every=500, test_frames=3)
    cfg = config_from_args(build_parser().parse_args(dt.train_argv('mix', budget, tmp_path, 1, 2)))
    assert (cfg.scenes, cfg.sim_overrides) == ('mix', {'mesh_object_fraction': 0.0})
    assert (cfg.assignment, cfg.model_overrides, cfg.lr) == ('dense', {'patch_geometry': True}, 7e-4)
    assert (cfg.steps, cfg.batch_size, cfg.num_train_frames, cfg.val_every) == (30, 4, 12, 30)
    assert cfg.out == str(tmp_path / 'train_mix') and cfg.cache_file.endswith('train_mix_12.npz')


def test_page_puts_training_sources_in_rows_and_test_sources_in_columns():
    def cell(train, test, iou, ap):
        return {'train': train, 'test': test, 'headline': {'avg_best_iou_sym': iou, 'ap3d_25_sym': ap},
                'eval_seconds': 30.0, 'frames_seconds': 30.0}
    results = {'budget': vars(dt.Budget()), 'train_sources': ['procedural', 'aloha'],
               'test_sources': ['procedural', 'aloha'], 'date': 'd', 'machine': 'm', 'load_average': 1.0,
               'command': 'python -m benchmarks.domain_transfer run', 'wall_seconds': 60.0,
               'training': {'procedural': {'seconds': 60.0}, 'aloha': {'seconds': 120.0}},
               'cells': [cell('procedural', 'procedural', 0.5, 0.7), cell('procedural', 'aloha', 0.1, 0.2),
                         cell('aloha', 'aloha', 0.4, 0.6)]}
    rows = [line for line in dt.render(results).splitlines() if line.startswith('| ')]
    assert rows[0] == '| trained on \\ tested on | procedural | aloha | mean IoU | mean AP |'
    assert rows[1] == '| --- | --- | --- | --- | --- |'
    assert rows[2] == '| procedural | **0.500 / 0.700** | 0.100 / 0.200 | 0.300 | 0.450 |'
    assert rows[3] == '| aloha | - | **0.400 / 0.600** | - | - |'          # a missing cell leaves no mean


def test_a_fine_tuned_table_starts_every_source_from_one_checkpoint(tmp_path):
    budget = dt.Budget(steps=30, batch_size=4, train_frames=12, lr=3e-4, init_from='models/vitd_tiny_cayley.pt')
    cfg = config_from_args(build_parser().parse_args(dt.train_argv('aloha', budget, tmp_path, 1, 2)))
    assert (cfg.init_from, cfg.lr, cfg.scenes) == ('models/vitd_tiny_cayley.pt', 3e-4, 'aloha')
    scratch = config_from_args(build_parser().parse_args(dt.train_argv('aloha', dt.Budget(), tmp_path, 1, 2)))
    assert scratch.init_from == ''


def test_the_start_row_comes_first_and_the_page_says_where_training_started():
    results = {'budget': vars(dt.Budget(lr=3e-4, init_from='models/x.pt')), 'train_sources': ['aloha'],
               'test_sources': ['aloha'], 'date': 'd', 'machine': 'm', 'load_average': 1.0, 'command': 'c',
               'wall_seconds': 60.0, 'training': {'aloha': {'seconds': 60.0}},
               'cells': [{'train': t, 'test': 'aloha', 'headline': {'avg_best_iou_sym': v, 'ap3d_25_sym': v},
                          'eval_seconds': 1.0, 'frames_seconds': 1.0} for t, v in (('aloha', 0.6), ('start', 0.3))]}
    page = dt.render(results)
    rows = [line for line in page.splitlines() if line.startswith('| ')]
    assert rows[2:] == ['| start | 0.300 / 0.300 | 0.300 | 0.300 |', '| aloha | **0.600 / 0.600** | 0.600 | 0.600 |']
    assert 'fine-tuned from `models/x.pt`' in page and 'lr 0.0003' in page


def test_an_output_folder_keeps_the_budget_its_runs_were_trained_with(tmp_path):
    dt.check_same_budget(tmp_path, dt.Budget(steps=30))
    dt.check_same_budget(tmp_path, dt.Budget(steps=30))                 # the same budget resumes
    with pytest.raises(SystemExit, match='init_from'):
        dt.check_same_budget(tmp_path, dt.Budget(steps=30, init_from='models/x.pt'))
