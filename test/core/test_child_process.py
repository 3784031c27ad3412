"""ChildProcess: waits for a line, notices an early exit, and stop() ends the child's whole process group."""
import os
import sys
import time

from string_perception.child_process import ChildProcess


def _py(tmp_path, name, code):
    return ChildProcess(name, [sys.executable, '-u', '-c', code], dict(os.environ), tmp_path / f'{name}.log')


def test_wait_for_line_sees_output_and_a_clean_exit(tmp_path):
    p = _py(tmp_path, 'ready', 'import time; time.sleep(0.3); print("node ready"); time.sleep(30)')
    try:
        assert p.wait_for_line('node ready', 10)
        assert p.popen.poll() is None
    finally:
        assert p.stop(grace=2) is not None
    q = _py(tmp_path, 'quick', 'print("done")')              # the line is written just before it exits
    assert q.wait_for_line('done', 10) and q.wait(5) == 0


def test_wait_for_line_gives_up_on_exit_and_on_timeout(tmp_path):
    p = _py(tmp_path, 'crash', 'import sys; print("starting"); sys.exit(3)')
    t0 = time.monotonic()
    assert not p.wait_for_line('node ready', 30)
    assert time.monotonic() - t0 < 10 and p.wait(5) == 3 and 'starting' in p.log()
    s = _py(tmp_path, 'silent', 'import time; time.sleep(30)')
    try:
        assert not s.wait_for_line('node ready', 0.5)
    finally:
        s.stop(grace=2)


def test_stop_ends_the_process_group_including_grandchildren(tmp_path):
    code = ('import subprocess, sys, time, signal; signal.signal(signal.SIGINT, signal.SIG_IGN); '
            'c = subprocess.Popen([sys.executable, "-c", "import time, signal; '
            'signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(60)"]); '
            'print("child", c.pid, flush=True); time.sleep(60)')
    p = _py(tmp_path, 'parent', code)                        # both ignore SIGINT: SIGTERM must follow
    assert p.wait_for_line('child', 10)
    grandchild = int(p.log().split('child')[1].split()[0])
    assert p.stop(grace=1) is not None
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        try:                                                 # reap it if it became our zombie (it is not ours)
            os.waitpid(grandchild, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.1)
    else:
        raise AssertionError(f'grandchild {grandchild} survived stop()')
