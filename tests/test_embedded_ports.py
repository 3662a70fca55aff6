"""Embedded servers on local ports: a server is used only once it listens itself, so a port
another process took between its choice and the server's bind is never mistaken for it."""

from __future__ import annotations

import socket

import pytest
import redis

from service import embedded


@pytest.fixture
def taken():
    """A port another process (here: a socket of this one) listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.mark.integration
def test_a_server_whose_port_was_taken_moves_to_a_free_one_and_is_its_own(tmp_path, taken):
    server = embedded.redis_server(tmp_path)  # a port of its own choosing...
    server.port, server.argv = taken, server.argv_for(taken)  # ...taken before it binds
    try:
        server.start()
        assert server.port != taken
        assert embedded.listens(server.proc.pid, server.port)
        assert str(server.port) in server.argv
        with redis.Redis(port=server.port) as r:
            assert int(r.info("server")["process_id"]) == server.proc.pid
        assert server.argv_for is None  # a restart keeps the port it has
    finally:
        server.stop()


@pytest.mark.integration
def test_a_server_on_a_port_the_caller_chose_refuses_one_another_process_holds(tmp_path, taken):
    server = embedded.redis_server(tmp_path, taken)
    try:
        with pytest.raises(embedded.PortTaken, match=str(taken)):
            server.start()
    finally:
        server.stop()


@pytest.mark.integration
def test_a_server_that_exits_before_listening_says_so(tmp_path):
    server = embedded.ChildProcess("redis", [embedded._redis_binary(), "--no-such-option"],
                                   embedded.free_port(), cwd=tmp_path)
    with pytest.raises(RuntimeError, match="exited with code"):
        server.start()
