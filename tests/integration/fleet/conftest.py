"""Fixtures for the fleet integration tests: a loopback sshd, started once per session."""

from __future__ import annotations

import pytest

from fleet_sshd import LoopbackSshd, ensure_openssh

SSH_PORT = 2201
HOSTS = ["127.0.0.2", "127.0.0.3"]
SLOW = ["127.0.0.5"]
UNREACHABLE = "127.0.0.4"


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    reason = ensure_openssh()
    if reason:
        pytest.skip(reason)
    server = LoopbackSshd(tmp_path_factory.mktemp("sshd"), SSH_PORT, HOSTS, slow=SLOW, slow_seconds=8)
    server.start()
    yield server
    server.stop()
