"""DDS environment, share-file lookup and the loopback Fast DDS profile (no DDS traffic here)."""
import ipaddress
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from string_perception import paths
from string_perception import dds_env as de

REPO = Path(__file__).resolve().parents[2]
NS = {'d': 'http://www.eprosima.com'}


def test_importing_ros_package_does_not_import_rclpy():
    code = ('import sys, string_perception.ros, string_perception.dds_env, string_perception.paths; '
            'bad = [m for m in ("rclpy", "cv2", "sensor_msgs") if m in sys.modules]; '
            'assert not bad, bad')
    subprocess.run([sys.executable, '-c', code], check=True, cwd=REPO)


def test_dds_env_defaults():
    env = de.dds_env(42)
    assert env['RMW_IMPLEMENTATION'] == 'rmw_fastrtps_cpp'
    assert env['ROS_DOMAIN_ID'] == '42'
    assert env['ROS_AUTOMATIC_DISCOVERY_RANGE'] == 'SUBNET'     # the loopback profile alone decides
    prof = Path(env['FASTDDS_DEFAULT_PROFILES_FILE'])
    assert prof.is_absolute() and prof.name == 'fastdds_loopback.xml' and prof.is_file()


def test_dds_env_options(tmp_path, monkeypatch):
    monkeypatch.setenv('ROS_DOMAIN_ID', '9')
    assert de.dds_env()['ROS_DOMAIN_ID'] == '9'
    assert 'FASTDDS_DEFAULT_PROFILES_FILE' not in de.dds_env(1, profile='')
    assert de.dds_env(1, profile='')['ROS_AUTOMATIC_DISCOVERY_RANGE'] == 'LOCALHOST'   # no profile: rmw's own
    assert de.dds_env(1, localhost_only=True)['ROS_AUTOMATIC_DISCOVERY_RANGE'] == 'LOCALHOST'
    assert de.dds_env(1, localhost_only=False)['ROS_AUTOMATIC_DISCOVERY_RANGE'] == 'SUBNET'
    own = tmp_path / 'mine.xml'
    own.write_text('<dds/>')
    assert de.dds_env(1, profile=own)['FASTDDS_DEFAULT_PROFILES_FILE'] == str(own.resolve())
    with pytest.raises(FileNotFoundError):
        de.dds_env(1, profile=tmp_path / 'missing.xml')
    for bad in (-1, 102):
        with pytest.raises(ValueError):
            de.dds_env(bad)


def test_merged_env_drops_conflicting_variables():
    base = {'PATH': '/bin', 'ROS_LOCALHOST_ONLY': '1', 'FASTRTPS_DEFAULT_PROFILES_FILE': '/x.xml'}
    env = de.merged_dds_env(5, base=base)
    assert env['PATH'] == '/bin' and env['ROS_DOMAIN_ID'] == '5'
    assert 'ROS_LOCALHOST_ONLY' not in env and 'FASTRTPS_DEFAULT_PROFILES_FILE' not in env
    env = de.merged_dds_env(5, base={'FASTDDS_DEFAULT_PROFILES_FILE': '/y.xml'}, profile='')
    assert 'FASTDDS_DEFAULT_PROFILES_FILE' not in env


def test_apply_dds_env_sets_this_process(monkeypatch):
    for k in ('RMW_IMPLEMENTATION', 'ROS_DOMAIN_ID', 'ROS_AUTOMATIC_DISCOVERY_RANGE',
              'FASTDDS_DEFAULT_PROFILES_FILE', 'ROS_LOCALHOST_ONLY'):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv('ROS_LOCALHOST_ONLY', '1')
    import os
    got = de.apply_dds_env(3)
    assert {k: os.environ[k] for k in got} == got
    assert 'ROS_LOCALHOST_ONLY' not in os.environ


def test_share_lookup_source_tree_and_override(tmp_path, monkeypatch):
    monkeypatch.delenv(paths.ENV_OVERRIDE, raising=False)
    assert paths.config_file('fastdds_loopback.xml') == (REPO / 'config' / 'fastdds_loopback.xml').resolve()
    (tmp_path / 'config').mkdir()
    (tmp_path / 'config' / 'fastdds_loopback.xml').write_text('<dds/>')
    monkeypatch.setenv(paths.ENV_OVERRIDE, str(tmp_path))
    assert paths.config_file('fastdds_loopback.xml') == (tmp_path / 'config' / 'fastdds_loopback.xml').resolve()
    assert paths.share_dirs()[0] == tmp_path
    with pytest.raises(FileNotFoundError, match='no_such_file'):
        paths.share_file('config', 'no_such_file.yaml')


def test_share_lookup_prefers_ament_index(tmp_path, monkeypatch):
    """On a ROS install the ament index (colcon/apt install) is used before the source tree."""
    prefix = tmp_path / 'install'
    (prefix / 'share' / 'ament_index' / 'resource_index' / 'packages').mkdir(parents=True)
    (prefix / 'share' / 'ament_index' / 'resource_index' / 'packages' / 'string_perception').write_text('')
    (prefix / 'share' / 'string_perception' / 'config').mkdir(parents=True)
    monkeypatch.delenv(paths.ENV_OVERRIDE, raising=False)
    monkeypatch.setenv('AMENT_PREFIX_PATH', str(prefix))
    pytest.importorskip('ament_index_python')
    assert paths.share_dirs()[0] == prefix / 'share' / 'string_perception'


def test_installed_data_files_include_the_profile():
    setup_py = (REPO / 'setup.py').read_text()
    assert "glob('config/*.xml')" in setup_py


# ---- the profile itself ------------------------------------------------------------------------------

def _profile():
    return ET.parse(REPO / 'config' / 'fastdds_loopback.xml').getroot()


def test_profile_transports():
    root = _profile()
    descs = {d.find('d:transport_id', NS).text: d for d in root.iterfind('.//d:transport_descriptor', NS)}
    kinds = {tid: d.find('d:type', NS).text for tid, d in descs.items()}
    assert sorted(kinds.values()) == ['SHM', 'UDPv4']
    shm = next(d for d in descs.values() if d.find('d:type', NS).text == 'SHM')
    assert int(shm.find('d:segment_size', NS).text) >= 16 * 1024 * 1024 > 640 * 480 * 3 * 8
    udp = next(d for d in descs.values() if d.find('d:type', NS).text == 'UDPv4')
    allowed = [i.get('name') for i in udp.iterfind('d:interfaces/d:allowlist/d:interface', NS)]
    assert allowed == ['127.0.0.1']
    part = root.find('.//d:participant', NS)
    assert part.get('is_default_profile') == 'true'
    rtps = part.find('d:rtps', NS)
    assert rtps.find('d:useBuiltinTransports', NS).text == 'false'
    assert sorted(t.text for t in rtps.iterfind('d:userTransports/d:transport_id', NS)) == sorted(descs)


def test_profile_names_only_loopback_addresses():
    root = _profile()
    addrs = [a.text.strip() for a in root.iter('{http://www.eprosima.com}address')]
    addrs += [i.get('name') for i in root.iter('{http://www.eprosima.com}interface')]
    assert addrs, 'expected explicit loopback addresses'
    assert all(ipaddress.ip_address(a).is_loopback for a in addrs), addrs
    peers = root.findall('.//d:builtin/d:initialPeersList/d:locator/d:udpv4/d:address', NS)
    assert [p.text for p in peers] == ['127.0.0.1']
    assert root.find('.//d:builtin/d:metatrafficMulticastLocatorList', NS) is None
