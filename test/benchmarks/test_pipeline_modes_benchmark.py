"""benchmarks/pipeline_modes.py runs every mode of a model on one frame and prints one row per model and mode."""
from benchmarks import pipeline_modes
from string_perception.runtime import Pipeline
from test.support.tiny_model import save_tiny_model


def test_every_mode_gets_a_row_relative_to_the_first(tmp_path, capsys):
    model = str(save_tiny_model(tmp_path / 'tiny.onnx', logit_bias=3.0))
    assert pipeline_modes.main([model, '--repeats', '2', '--threads', '1']) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f'| {model} |')]
    assert [r.split(' | ')[1] for r in rows] == ['plain', 'flip', 'tiles2x2']
    assert rows[0].endswith('| 1.00 |')                            # the plain mode against itself
    pipe = Pipeline(model, ('CPUExecutionProvider',), intra_op_threads=1)
    assert pipeline_modes.set_mode(pipe, 'tiles2x2').tiling.grid == (2, 2) and not pipe.params['flip_tta']
    assert pipeline_modes.set_mode(pipe, 'flip').params['flip_tta'] is True and pipe.tiling is None
    assert pipeline_modes.set_mode(pipe, 'plain').params['flip_tta'] is False and pipe.tiling is None
