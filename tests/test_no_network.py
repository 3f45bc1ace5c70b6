"""The test suite runs offline: sockets are blocked, and tests of local servers reach loopback only."""

from __future__ import annotations

import socket

import pytest
from pytest_socket import SocketBlockedError, SocketConnectBlockedError


def test_a_unit_test_cannot_open_a_socket() -> None:
    with pytest.raises(SocketBlockedError):
        socket.create_connection(("198.51.100.7", 80), timeout=1)


@pytest.mark.loopback
def test_a_loopback_test_reaches_127_0_0_1_and_nothing_else() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), timeout=5):
            pass
    with pytest.raises(SocketConnectBlockedError):
        socket.create_connection(("198.51.100.7", 80), timeout=1)
