"""README: its first lines keep the two commands. docs/node.md: its parameter and topic tables equal what
scripts/readme_tables.py generates from node_params.PARAMS and ros/interface.TOPICS (docs/policy.md: the policy node's);
and TOPICS is what a running node really subscribes and publishes (names and types, in both input transports)."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from string_perception.ros import interface as I
from string_perception import node_params as P
from string_perception.ros import policy_params as PP

REPO = Path(__file__).resolve().parents[2]


def test_readme_starts_with_the_two_commands():
    head = (REPO / 'README.md').read_text().splitlines()[:6]
    assert head[0] == '# string_perception'
    assert any(line.startswith('make demo') for line in head) and any(line.startswith('make test') for line in head)


def _block(text: str, key: str) -> list[str]:
    """The lines of the generated table ``key`` in ``text`` (header and separator included)."""
    return text.split(I.MARKERS[key][0])[1].split(I.MARKERS[key][1])[0].strip().splitlines()


def test_docs_tables_are_generated_from_the_declarations():
    assert I.TABLE_PAGES == {'docs/node.md': ('parameters', 'topics'),
                             'docs/policy.md': ('policy_parameters', 'policy_topics')}
    for page, keys in I.TABLE_PAGES.items():
        text = (REPO / page).read_text()
        assert I.render_tables(text, keys) == text, f'{page}: run python scripts/readme_tables.py'
    node = (REPO / 'docs' / 'node.md').read_text()
    assert [row.split('|')[1].strip(' `') for row in _block(node, 'parameters')[2:]] == [p.name for p in P.PARAMS]
    assert [row.split('|')[2].strip(' `') for row in _block(node, 'topics')[2:]] == [t.name for t in I.TOPICS]
    policy = (REPO / 'docs' / 'policy.md').read_text()
    assert [row.split('|')[1].strip(' `') for row in _block(policy, 'policy_parameters')[2:]] == [
        p.name for p in PP.PARAMS]
    assert [row.split('|')[2].strip(' `') for row in _block(policy, 'policy_topics')[2:]] == [
        t.name for t in I.POLICY_TOPICS]
    readme = (REPO / 'README.md').read_text()
    assert not any(begin in readme for begin, _ in I.MARKERS.values())     # the tables live in the docs pages only


def test_script_checks_and_rewrites(tmp_path):
    (tmp_path / 'docs').mkdir()
    for page in I.TABLE_PAGES:
        (tmp_path / page).write_text((REPO / page).read_text())
    node = tmp_path / 'docs' / 'node.md'
    node.write_text(node.read_text().replace('| `nms_iou` |', '| `nms_iou_old` |'))
    policy = tmp_path / 'docs' / 'policy.md'
    policy.write_text(policy.read_text().replace('| `on_miss` |', '| `on_miss_old` |'))
    script = [sys.executable, str(REPO / 'scripts' / 'readme_tables.py'), '--root', str(tmp_path)]
    check = subprocess.run([*script, '--check'], capture_output=True, text=True)
    assert check.returncode == 1 and 'node.md' in check.stdout and 'policy.md' in check.stdout
    assert subprocess.run(script, capture_output=True).returncode == 0
    for page in I.TABLE_PAGES:
        assert (tmp_path / page).read_text() == (REPO / page).read_text(), page
    assert subprocess.run([*script, '--check'], capture_output=True).returncode == 0
    with pytest.raises(ValueError, match='parameters:begin'):
        I.replace_between_markers('no markers here', 'parameters', 'x')
    with pytest.raises(ValueError, match='policy_topics:begin'):
        I.render_tables((REPO / 'docs' / 'node.md').read_text(), ('policy_topics',))


def _resolve(name: str, node: str, ns: str = '') -> str:
    return f'{ns}/{node}/{name[2:]}' if name.startswith('~/') else name if name.startswith('/') else f'{ns}/{name}'


def _graph(node, pubs_want: dict, subs_want: dict):
    """The node's publishers and subscriptions once they equal the wanted ones (the graph cache fills and empties
    through DDS discovery), or whatever is there after 60 s (a loaded machine is slow)."""
    name, ns, deadline = node.get_name(), node.get_namespace(), time.monotonic() + 60.0
    while True:
        pubs = {t: tuple(ty) for t, ty in node.get_publisher_names_and_types_by_node(name, ns)
                if t not in ('/rosout', '/parameter_events') and not t.endswith(f'/{name}/transition_event')}
        subs = {t: tuple(ty) for t, ty in node.get_subscriber_names_and_types_by_node(name, ns)
                if t != '/parameter_events'}
        if (pubs == pubs_want and subs == subs_want) or time.monotonic() > deadline:
            return pubs, subs
        time.sleep(0.1)


@pytest.mark.ros
@pytest.mark.slow
def test_topics_match_a_running_node(model_path, monkeypatch):
    """One node, configured twice: raw inputs, then compressed colour + compressedDepth (tracking and /tf on)."""
    rclpy = pytest.importorskip('rclpy')
    from test.support.ros_helpers import reserved_domain_id, ros_skip_reason
    if ros_skip_reason('vision_msgs'):
        pytest.skip(ros_skip_reason('vision_msgs'))
    from rclpy.parameter import Parameter
    from string_perception.dds_env import merged_dds_env
    from string_perception.ros.node import SUCCESS, StringPerceptionNode
    # A namespace of its own: an earlier test's node of the same name on this domain (the domain id derives from
    # the pid, so every in-process ROS test shares it) cannot stand in for this one in the graph queries.
    ns = f'/readme_tables_{os.getpid()}'
    expected_out = {_resolve(t.name, P.NODE_NAME, ns): (t.type,) for t in I.TOPICS if t.direction == 'out'}
    inputs = {t.name: (t.type,) for t in I.TOPICS if t.direction == 'in'}
    args = ['-p', 'autostart:=false', '-p', f'model_path:={model_path}', '-p', 'tracking:=true',
            '-p', 'publish_tf:=true', '-r', f'__ns:={ns}']
    with reserved_domain_id() as domain:
        for k, v in merged_dds_env(domain).items():
            monkeypatch.setenv(k, v)
        ctx = rclpy.Context()
        rclpy.init(args=['x', '--ros-args', *args], context=ctx)
        node = StringPerceptionNode(context=ctx)
        try:
            for image, depth, wanted in (
                    ('raw', 'raw', ['image', 'depth']),
                    ('compressed', 'compressedDepth', ['image/compressed', 'depth/compressedDepth'])):
                node.set_parameters([Parameter('image_transport', value=image),
                                     Parameter('depth_transport', value=depth)])
                assert node.trigger_configure() == SUCCESS and node.trigger_activate() == SUCCESS
                subs_want = {_resolve(n, P.NODE_NAME, ns): inputs[n] for n in [*wanted, 'camera_info']}
                pubs, subs = _graph(node, expected_out, subs_want)
                seen = node.get_node_names_and_namespaces()
                assert pubs == expected_out, f'{image}/{depth}: nodes in the graph {seen}'
                assert subs == subs_want, f'{image}/{depth}: nodes in the graph {seen}'
                assert node.trigger_deactivate() == SUCCESS and node.trigger_cleanup() == SUCCESS
        finally:
            node.destroy_node()
            rclpy.shutdown(context=ctx)
