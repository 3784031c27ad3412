"""A child process in its own session with its output in a log file: start, wait for a line, always stop.

The demo runs the node this way, and the multi-process tests run nodes, players, recorders and peers this way
(``test/ros_helpers.ProcessGroup``). Its own session means :meth:`ChildProcess.stop` signals the whole process
group, so anything the child started ends with it.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

__all__ = ['ChildProcess']

POLL_S = 0.1


class ChildProcess:
    """``ChildProcess(name, cmd, env, log_path)`` starts ``cmd`` with stdout+stderr into ``log_path``."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], log_path: Path, cwd: Path | None = None):
        self.name, self.log_path = name, Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, 'wb') as log:
            self.popen = subprocess.Popen(cmd, env=env, cwd=None if cwd is None else str(cwd), stdout=log,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log(self, tail: int = 4000) -> str:
        """The last ``tail`` characters of the output so far ('' before the file exists)."""
        try:
            return self.log_path.read_text(errors='replace')[-tail:]
        except OSError:
            return ''

    def wait_for_line(self, text: str, timeout: float) -> bool:
        """True once ``text`` appears in the output; False if the process ends or ``timeout`` s pass first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log(10_000_000):
                return True
            if self.popen.poll() is not None:
                return text in self.log(10_000_000)   # written just before it exited
            time.sleep(POLL_S)
        return False

    def wait(self, timeout: float) -> int:
        """Exit code; raises TimeoutError (process left running) if it does not end in time."""
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f'{self.name} (pid {self.pid}) still running after {timeout:.0f} s; '
                               f'log tail:\n{self.log()}') from None

    def stop(self, grace: float = 5.0) -> int | None:
        """SIGINT, then SIGTERM, then SIGKILL to the process group, each after ``grace`` s; the exit code."""
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            if self.popen.poll() is not None:
                break
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                continue
        return self.popen.poll()
