"""A runtime-only install (requirements/runtime.txt + ROS, no torch / mujoco / pybullet) collects the whole test
suite without errors and runs the runtime tests.

The source check (``optional_deps``) is cheap and catches a new test module that imports an optional dependency
at module level without ``pytest.importorskip``; the slow test builds the real runtime-only venv with
``scripts/runtime_only_tests.sh`` and runs pytest in it.
"""
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from test.support import optional_deps as O

REPO = Path(__file__).resolve().parents[2]
TEST_FILES = sorted((REPO / 'test').rglob('*.py'))                # test modules, helpers, __init__, conftest


def _requirement_names(name: str) -> set[str]:
    lines = (REPO / 'requirements' / name).read_text().splitlines()
    return {re.split(r'[=<>\[ ;]', ln.strip(), maxsplit=1)[0].lower() for ln in lines
            if ln.strip() and not ln.lstrip().startswith('#')}


@pytest.mark.parametrize('path', TEST_FILES, ids=lambda p: str(p.relative_to(REPO / 'test')))
def test_module_level_imports_of_optional_dependencies_are_skipped_first(path):
    missing = O.missing_skips(path)
    assert not missing, (f'{path.relative_to(REPO)}: module-level imports needing optional dependencies without a '
                         f'pytest.importorskip above them (line, needs): {missing}')


def test_the_optional_dependencies_are_not_runtime_requirements():
    runtime = _requirement_names('runtime.txt') | _requirement_names('ros.txt')
    for module, (req_file, dist) in O.OPTIONAL.items():
        assert dist in _requirement_names(req_file), (module, req_file)
        assert dist not in runtime, module


def test_the_runtime_needs_none_of_them_and_training_and_sim_do():
    """The node, the bag tools and the runtime import no optional dependency (the README's promise: no torch on
    the workcell); training and the simulated cells do, so the analysis is not blind."""
    for module in ('string_perception.ros.node', 'string_perception.ros.policy_node', 'string_perception.runtime',
                   'string_perception.runtime.pipeline', 'string_perception.bags.play',
                   'string_perception.bags.record', 'string_perception.bags.eval_bag', 'string_perception.demo'):
        assert O.module_needs(module) == frozenset(), module
    assert 'torch' in O.module_needs('string_perception.training.train')
    assert 'torch' in O.module_needs('string_perception.export.pipeline')
    assert 'mujoco' in O.module_needs('string_perception.sim')
    assert O.module_needs('test.support.bag_helpers') == frozenset()     # test helpers are followed too
    assert 'torch' in O.module_needs('test.training.test_training')    # test modules resolve by their package path


def test_the_check_flags_an_unguarded_import_and_accepts_a_guarded_one(tmp_path):
    cases = {
        'bare': ('import numpy\nimport torch\n', [(2, {'torch'})]),
        'through_the_package': ('from string_perception.training import train\n', [(1, {'torch'})]),
        'through_a_relative_package_import': ('from string_perception.sim import SIM_CLASS_NAMES\n',
                                              [(1, {'mujoco'})]),
        'skipped_first': ("import pytest\npytest.importorskip('torch')\nimport torch\n", []),
        'assigned_skip': ("import pytest\ntorch = pytest.importorskip('torch')\nfrom string_perception.model "
                          "import ViTD\n", []),
        'skipped_too_late': ("import pytest\nimport torch\npytest.importorskip('torch')\n", [(2, {'torch'})]),
        'wrong_skip': ("import pytest\npytest.importorskip('torch')\nimport mujoco\n", [(3, {'mujoco'})]),
        'inside_a_function': ('def f():\n    import torch\n', []),
        'guarded_by_try': ('try:\n    import torch\nexcept ImportError:\n    torch = None\n', []),
    }
    for name, (source, want) in cases.items():
        path = tmp_path / f'test_{name}.py'
        path.write_text(textwrap.dedent(source))
        assert O.missing_skips(path) == want, name


@pytest.mark.slow
def test_a_runtime_only_venv_collects_everything_and_runs_runtime_tests(tmp_path):
    """scripts/runtime_only_tests.sh in a new venv: pip (runtime.txt + ros.txt + pytest), the interfaces build,
    no optional dependency importable, the whole suite collects, and a few runtime tests (bags, ROS, launch) run."""
    venv = tmp_path / 'venv'
    main_venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items()
           if k not in ('_ROS_WHEELS_BOOTSTRAP_COMPLETE', 'LD_LIBRARY_PATH', 'VIRTUAL_ENV', 'PYTHONPATH',
                        'AMENT_PREFIX_PATH', 'PYTEST_ADDOPTS')}
    env['PATH'] = os.pathsep.join(p for p in env.get('PATH', '').split(os.pathsep) if p != main_venv_bin)
    env['PYTHON'] = sys.base_prefix + '/bin/python3'      # the interpreter this venv was made from
    tests = ['test/docs/test_runtime_only.py', 'test/bags/test_bags_format.py', 'test/ros/test_node_launch.py',
             'test/runtime/test_runtime_pipeline.py', '-m', 'not slow']
    try:
        proc = subprocess.run(['bash', 'scripts/runtime_only_tests.sh', str(venv), *tests], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=1200)
    finally:
        shutil.rmtree(venv, ignore_errors=True)              # ~1.1 GB
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    skipped = re.search(r'(\d+) test modules skip', out)
    collected = re.search(r'(\d+) tests collected', out)
    assert skipped and collected, out[-3000:]
    assert int(skipped.group(1)) >= 30 and int(collected.group(1)) > 500, out[-3000:]
    summary = re.search(r'(\d+) passed', out.splitlines()[-1])
    assert summary and int(summary.group(1)) > 50 and 'failed' not in out.splitlines()[-1], out[-3000:]
