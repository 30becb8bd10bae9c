"""The embedded shard served to other processes (automem/vectors/shared.py): what the
common backend suite (tests/integration/test_vector_store.py, backend "shared") does not
cover — errors crossing the socket, a lost connection, and who may connect."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from automem.common.errors import Unavailable
from automem.vectors import DimensionMismatchError, EdgeVectorStore
from automem.vectors.shared import ShardServer, SharedVectorStore, socket_path

DIM = 4


async def _served(tmp_path: Path) -> tuple[EdgeVectorStore, ShardServer, SharedVectorStore]:
    edge = EdgeVectorStore(tmp_path / "shard", "memories")
    await edge.ensure_collection(DIM)
    server = ShardServer(edge, socket_path(tmp_path))
    await server.start()
    return edge, server, SharedVectorStore(server.path, "memories")


async def test_errors_of_the_parent_store_reach_the_caller_with_their_fields(tmp_path):
    edge, server, client = await _served(tmp_path)
    try:
        with pytest.raises(DimensionMismatchError) as caught:
            await client.ensure_collection(16)
        assert (caught.value.collection, caught.value.existing, caught.value.requested) == ("memories", DIM, 16)
        with pytest.raises(ValueError, match="not a UUID|uuid"):
            await client.upsert("not-a-uuid", [1.0, 0.0, 0.0, 0.0], {})
        with pytest.raises(ValueError, match="unknown vector store method 'close'"):
            await client._call("close")
        assert await edge.count() == 0  # nothing was written by the refused calls
    finally:
        await client.close()
        await server.close()
        await edge.close()


async def test_a_lost_connection_fails_the_call_and_the_next_call_reconnects(tmp_path):
    edge, server, client = await _served(tmp_path)
    try:
        pid = str(uuid.uuid4())
        await client.upsert(pid, [1.0, 0.0, 0.0, 0.0], {"scope": "a"})
        await server.close()  # the parent goes away: its socket is removed
        assert not server.path.exists()
        with pytest.raises(Unavailable, match="vector store"):
            await client.count()
        server = ShardServer(edge, server.path)  # and comes back
        await server.start()
        assert await client.count() == 1
        assert [p.id for p in await client.retrieve([pid])] == [pid]
    finally:
        await client.close()
        await server.close()
        await edge.close()


async def test_only_this_user_may_connect(tmp_path, monkeypatch):
    """The socket is created 0600 in a 0700 directory, and the server hangs up on a peer whose
    uid (SO_PEERCRED) is not its own: here the server is made to believe it runs as another
    user, so this process is that other user."""
    edge, server, client = await _served(tmp_path)
    try:
        assert server.path.stat().st_mode & 0o777 == 0o600
        assert server.path.parent.stat().st_mode & 0o777 == 0o700
        monkeypatch.setattr("automem.vectors.shared.os.getuid", lambda: os.geteuid() + 4242)
        with pytest.raises(Unavailable, match="connection lost"):
            await client.count()
        monkeypatch.undo()
        assert await client.count() == 0
    finally:
        await client.close()
        await server.close()
        await edge.close()


def test_socket_path_falls_back_to_a_private_temp_dir_when_the_data_dir_is_too_deep(tmp_path):
    assert socket_path(tmp_path) == tmp_path.resolve() / "run" / "vectors.sock"
    deep = tmp_path / ("d" * 120)
    path = socket_path(deep)
    assert len(os.fsencode(path)) <= 107 and path.name == "vectors.sock"
    assert path.parent.stat().st_mode & 0o777 == 0o700
    path.parent.rmdir()


async def test_close_removes_the_socket_and_its_empty_directory(tmp_path):
    edge, server, client = await _served(tmp_path)
    await client.close()
    await server.close()
    await edge.close()
    assert not server.path.exists() and not server.path.parent.exists()
