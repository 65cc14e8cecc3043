"""Helpers for the serving tests: the serve venv, free ports, a server process with a handle."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVE_PYTHON = os.environ.get("STITCH_SERVE_PYTHON",
                              os.path.join(REPO, ".venv-serve", "bin", "python"))
CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "client.py")


def serve_python() -> str:
    """The serve venv's python; `make test` requires it (a missing one fails, not skips)."""
    if os.path.exists(SERVE_PYTHON):
        return SERVE_PYTHON
    message = f"serve environment missing at {SERVE_PYTHON}; run make serve-env"
    if os.environ.get("STITCH_REQUIRE_SERVE") == "1":
        pytest.fail(message)
    pytest.skip(message)


def serve_site_packages() -> str:
    return subprocess.check_output(
        [serve_python(), "-c", "import site; print(site.getsitepackages()[0])"],
        text=True).strip()


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class Server:
    """A server process in its own session, stopped by its handle (SIGTERM, then SIGKILL)."""

    def __init__(self, argv: list[str], http_port: int, log_path: str, env=None) -> None:
        self.http_port = http_port
        self.log_path = log_path
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     env=env, cwd=REPO, start_new_session=True)

    def wait_ready(self, model: str, timeout: float = 120) -> None:
        url = f"http://127.0.0.1:{self.http_port}/v2/models/{model}/ready"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise AssertionError(f"server not ready after {timeout}s:\n{self.log()[-3000:]}")

    def stop(self, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
                raise AssertionError(f"server ignored SIGTERM for {timeout}s") from None
        self._log.close()
        return self.proc.returncode

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()


def run_client(config_path: str, timeout: float = 120) -> None:
    done = subprocess.run([serve_python(), CLIENT, config_path], capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr

