"""One channels_postgres connection pool per event loop.

channels_postgres keeps a single module-level pool (and lock), bound to whichever event loop
first used it. Sync code — workers streaming job progress, management commands — reaches the
layer through `async_to_sync`, which runs every call in a fresh event loop: the pool is then
tied to a loop that has closed, and sooner or later asking it for a connection hangs for 30 s
(psycopg_pool.PoolTimeout). A pool per loop, with pools of closed loops dropped, keeps every
caller on connections its own loop can drive.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

_pools: dict[asyncio.AbstractEventLoop, Any] = {}
_locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
_guard = threading.Lock()


async def _configure(connection) -> None:
    # As channels_postgres configures its own connections.
    await connection.set_autocommit(True)
    connection.prepare_threshold = 0
    connection.prepared_max = None


async def get_db_pool_per_loop(self, db_params: dict[str, Any]):
    import psycopg
    import psycopg_pool

    loop = asyncio.get_running_loop()
    with _guard:
        for closed in [other for other in _pools if other.is_closed()]:
            _pools.pop(closed, None)  # its connections die with their sockets
            _locks.pop(closed, None)
        lock = _locks.setdefault(loop, asyncio.Lock())
    async with lock:
        pool = _pools.get(loop)
        if pool is None:
            pool = psycopg_pool.AsyncConnectionPool(
                conninfo=psycopg.conninfo.make_conninfo(conninfo="", **db_params),
                open=False,
                configure=_configure,
                **self.psycopg_options,
            )
            await pool.open(wait=True)
            _pools[loop] = pool
        return pool


def install() -> None:
    """Replace channels_postgres's process-wide pool with one pool per event loop."""
    try:
        from channels_postgres.db import DatabaseLayer
    except ImportError:
        return
    DatabaseLayer.get_db_pool = get_db_pool_per_loop
