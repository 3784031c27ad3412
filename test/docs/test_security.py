"""Security (issue 7): checkpoints load without executing pickled code, every torch.load is weights_only, the
ONNX model's weights checksum is enforced at the node's configure step with a clear message (no traceback)."""
import ast
import json
import pickle
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = sorted(p for d in ('string_perception', 'benchmarks', 'scripts') for p in (REPO / d).rglob('*.py'))


def _calls(tree, name):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            dotted = f'{getattr(f.value, "id", "")}.{f.attr}' if isinstance(f, ast.Attribute) else getattr(f, 'id', '')
            if dotted == name:
                yield node


def test_no_source_unpickles_untrusted_data():
    problems = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(), str(path))
        rel = path.relative_to(REPO)
        for call in _calls(tree, 'torch.load'):
            kw = {k.arg: k.value for k in call.keywords}
            if not (isinstance(kw.get('weights_only'), ast.Constant) and kw['weights_only'].value is True):
                problems.append(f'{rel}:{call.lineno} torch.load without weights_only=True')
        for call in _calls(tree, 'np.load'):
            kw = {k.arg: k.value for k in call.keywords}
            if isinstance(kw.get('allow_pickle'), ast.Constant) and kw['allow_pickle'].value is not False:
                problems.append(f'{rel}:{call.lineno} np.load(allow_pickle=True)')
        for name in ('pickle.load', 'pickle.loads', 'yaml.load', 'yaml.unsafe_load', 'torch.jit.load'):
            problems += [f'{rel}:{c.lineno} {name}' for c in _calls(tree, name)]
    assert SOURCES and not problems, problems


class _Payload:
    """Unpickling this runs ``Path(marker).touch()``: what a malicious checkpoint would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_malicious_checkpoint_is_refused_without_running_its_code(tmp_path):
    torch = pytest.importorskip('torch')
    from string_perception.model import load_checkpoint
    from string_perception.training.checkpoint import load_training_checkpoint
    marker, ckpt = tmp_path / 'pwned', tmp_path / 'evil.pt'
    torch.save({'config': {}, 'model': {}, 'extra': _Payload(marker)}, ckpt)
    for loader in (load_checkpoint, load_training_checkpoint):
        with pytest.raises(pickle.UnpicklingError):
            loader(ckpt)
        assert not marker.exists(), f'{loader.__name__} executed pickled code'
    torch.load(ckpt, weights_only=False)       # the control: the payload is real
    assert marker.exists()


FAULTS_SCRIPT = textwrap.dedent('''
    import json, sys
    import rclpy
    from rclpy.parameter import Parameter
    from string_perception.ros.node import StringPerceptionNode, SUCCESS
    rclpy.init(args=['x', '--ros-args', '-p', 'autostart:=false', '-p', 'providers:=["CPUExecutionProvider"]'])
    node = StringPerceptionNode()
    out = {}
    for path in sys.argv[1:]:
        node.set_parameters([Parameter('model_path', value=path)])
        out[path] = node.trigger_configure() == SUCCESS
        if out[path]:
            node.trigger_cleanup()
    print('RESULT ' + json.dumps(out), flush=True)
    node.destroy_node(); rclpy.try_shutdown()
''')


@pytest.mark.ros
def test_model_faults_fail_configure_with_one_clear_line(tmp_path, model_path):
    from test.support.ros_helpers import ProcessGroup, reserved_domain_id, ros_skip_reason, ros_test_env
    if ros_skip_reason('vision_msgs'):
        pytest.skip(ros_skip_reason('vision_msgs'))
    from test.support.tiny_model import save_tiny_model
    good = Path(model_path).read_bytes()
    # file -> the error kind its configure failure must name
    files = {tmp_path / 'nope.onnx': 'missing_file', tmp_path / 'truncated.onnx': 'corrupt_file',
             tmp_path / 'text.onnx': 'corrupt_file', tmp_path / 'tampered.onnx': 'checksum_mismatch',
             tmp_path / 'wrong_input.onnx': 'contract_mismatch'}
    (tmp_path / 'truncated.onnx').write_bytes(good[: len(good) // 3])
    (tmp_path / 'text.onnx').write_text('{"this": "is json, not ONNX"}')
    save_tiny_model(tmp_path / 'tampered.onnx', tamper_weights=True)
    save_tiny_model(tmp_path / 'wrong_input.onnx', input_names=('rgb', 'depth', 'intrinsics'))   # contract: 'image'
    paths = [str(p) for p in files] + [str(model_path)]
    with reserved_domain_id() as domain, ProcessGroup(tmp_path, ros_test_env(domain)) as pg:
        proc = pg.start_python('faults', ['-c', FAULTS_SCRIPT, *paths])
        rc = proc.wait(timeout=60)
        log = proc.log(10 ** 6)
    assert rc == 0, log
    ok = json.loads(log.split('RESULT ', 1)[1].splitlines()[0])
    assert ok[str(model_path)] is True                # the good model still configures after the faults
    assert 'Traceback' not in log, log
    for path, kind in files.items():
        assert ok[str(path)] is False, kind
        lines = [ln for ln in log.splitlines() if 'configure failed' in ln and path.name in ln]
        assert len(lines) == 1 and kind in lines[0], (kind, log)
