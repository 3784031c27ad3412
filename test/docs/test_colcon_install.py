"""The ROS install path: ``colcon build`` of this package (as a ROS user builds it) into a temporary install
space, then the install layout, and the INSTALLED node answering the bundled recording over loopback DDS.

colcon comes from PyPI (``colcon-common-extensions``, pinned in requirements/dev.txt). The package is copied into
a temporary workspace ``src/`` first, so the build never writes into this checkout. Every process after the build
runs with ``PYTHONPATH`` = the install space's site-packages (not the checkout), ``AMENT_PREFIX_PATH`` = the
install prefix, and a working directory outside the checkout.
"""
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from test.support.ros_helpers import REPO, ProcessGroup, reserved_domain_id, ros_skip_reason, ros_test_env

PACKAGE = 'string_perception'
COLCON = Path(sys.executable).parent / 'colcon'
CAMERA = {'image': '/camera/color/image_raw', 'depth': '/camera/depth/image_raw',
          'camera_info': '/camera/color/camera_info'}
DETECTIONS = f'/{PACKAGE}/detections'
SKIP = (f'{COLCON} missing (pip install -r requirements/dev.txt)' if not COLCON.exists()
        else ros_skip_reason('vision_msgs'))
pytestmark = [pytest.mark.slow, pytest.mark.skipif(SKIP is not None, reason=str(SKIP))]
_IGNORE = shutil.ignore_patterns('.git', '.venv', 'build', 'install', 'log', 'runs', 'out', '__pycache__',
                                 '*.egg-info', '.pytest_cache', '.hypothesis', '*.pt')


@pytest.fixture(scope='module')
def install(tmp_path_factory) -> Path:
    """``colcon build`` of a copy of this package; returns the package's install prefix."""
    ws = tmp_path_factory.mktemp('colcon_ws')
    shutil.copytree(REPO, ws / 'src' / PACKAGE, ignore=_IGNORE)
    env = {**os.environ, 'PATH': f'{COLCON.parent}{os.pathsep}{os.environ.get("PATH", "")}'}
    proc = subprocess.run([str(COLCON), '--log-base', 'log', 'build', '--base-paths', 'src',
                           '--build-base', 'build', '--install-base', 'install', '--packages-select', PACKAGE,
                           '--event-handlers', 'console_direct-'],
                          cwd=ws, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return ws / 'install' / PACKAGE


def _site_packages(prefix: Path) -> Path:
    rel = Path(sysconfig.get_path('purelib')).relative_to(sys.prefix)    # lib/python3.X/site-packages
    return prefix / rel


def _console_scripts() -> list[str]:
    return re.findall(r"'([\w-]+) = [\w.]+:\w+'", (REPO / 'setup.py').read_text())


def _installed_env(env: dict, prefix: Path) -> dict:
    env = dict(env)
    env['PYTHONPATH'] = str(_site_packages(prefix))           # the install space, not the checkout
    env['AMENT_PREFIX_PATH'] = os.pathsep.join(p for p in (str(prefix), os.environ.get('AMENT_PREFIX_PATH')) if p)
    env.pop('STRING_PERCEPTION_SHARE', None)
    return env


def test_install_layout(install):
    share = install / 'share' / PACKAGE
    for sub in ('launch', 'config', 'models'):
        assert (share / sub).is_dir() and any((share / sub).iterdir()), sub
    assert (share / 'launch' / 'string_perception.launch.py').is_file()
    assert (share / 'config' / 'default.yaml').read_text() == (REPO / 'config' / 'default.yaml').read_text()
    assert (share / 'models' / 'vitd_tiny_cayley.onnx').is_file() and (share / 'models' / 'vitd_workcell.onnx').is_file()
    assert (share / 'package.xml').is_file()
    assert (install / 'share' / 'ament_index' / 'resource_index' / 'packages' / PACKAGE).is_file()
    scripts = _console_scripts()
    assert 'string_perception_node' in scripts and len(scripts) >= 9
    for name in scripts:                                      # ros2 run looks in lib/<package>/
        exe = install / 'lib' / PACKAGE / name
        assert exe.is_file() and os.access(exe, os.X_OK), name
    assert (_site_packages(install) / PACKAGE / 'ros' / 'node.py').is_file()


def test_installed_package_resolves_its_share_files_through_the_ament_index(install, tmp_path):
    code = ('import string_perception, string_perception.paths as p; '
            'print(string_perception.__file__); print(p.share_file("models", "vitd_tiny_cayley.onnx"))')
    out = subprocess.run([sys.executable, '-c', code], cwd=tmp_path, env=_installed_env(os.environ, install),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    module, model = out.stdout.split()
    assert Path(module).is_relative_to(install) and Path(model).is_relative_to(install / 'share' / PACKAGE)


@pytest.mark.ros
def test_installed_node_answers_the_bundled_recording(install, tmp_path):
    from string_perception.bags.reader import open_bag
    from string_perception.bags.record import RECORDING_LINE
    from string_perception.bags.typestore import make_typestore
    from string_perception.ros.node import READY_LINE
    from string_perception.runtime.model_variant import node_model_choice

    lib, share = install / 'lib' / PACKAGE, install / 'share' / PACKAGE
    recording = share / 'data' / 'sample_recording'
    args = ['--ros-args', '-p', 'providers:=["CPUExecutionProvider"]', '-p', 'image_transport:=compressed']
    for name, topic in CAMERA.items():
        args += ['-r', f'{name}:={topic}']
    out = tmp_path / 'answers'
    with reserved_domain_id() as domain, \
            ProcessGroup(tmp_path / 'logs', _installed_env(ros_test_env(domain), install)) as pg:
        node = pg.start_python('node', [str(lib / 'string_perception_node'), *args], cwd=tmp_path)
        assert node.wait_for_line(READY_LINE, 90), pg.logs()
        # the installed default model, or its installed int8 sibling where this CPU runs that (model_variant.py)
        default = node_model_choice(share / 'models' / 'vitd_workcell.onnx').path
        assert f'configured: model {default} ' in node.log(), pg.logs()
        rec = pg.start_python('record', [str(lib / 'string-perception-record'), DETECTIONS, '-o', str(out)],
                              cwd=tmp_path)
        assert rec.wait_for_line(f'{RECORDING_LINE} {DETECTIONS}', 30), pg.logs()
        play = pg.start_python('play', [str(lib / 'string-perception-play'), str(recording), '--rate', '0.5',
                                        '--topics', f'{CAMERA["image"]}/compressed', CAMERA['depth'],
                                        CAMERA['camera_info'], '--wait-for-subscribers', '1'], cwd=tmp_path)
        assert play.wait(timeout=90) == 0, pg.logs()
        import time
        time.sleep(2.0)                                       # the node's last answers
        assert rec.stop() == 0 and node.popen.poll() is None, pg.logs()
        assert node.stop() == 0, pg.logs()

    def stamps(bag, topic):
        reader = open_bag(bag)
        try:
            conns = [c for c in reader.connections if c.topic == topic]
            store = make_typestore()
            return [store.deserialize_cdr(raw, c.msgtype).header.stamp for c, _, raw in reader.messages(conns)]
        finally:
            reader.close()

    sent = {s.sec * 10**9 + s.nanosec for s in stamps(recording, CAMERA['camera_info'])}
    got = [s.sec * 10**9 + s.nanosec for s in stamps(out, DETECTIONS)]
    assert got, 'the installed node published no detections'
    assert set(got) <= sent                                   # each answer carries one recorded frame's stamp
