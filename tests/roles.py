"""Running service roles as asyncio tasks inside a test."""

from __future__ import annotations

import asyncio
import contextlib

from service.profiles.store import Store
from service.runtime.roles import start_roles
from service.settings import Settings


@contextlib.asynccontextmanager
async def running(settings: Settings, store: Store, *roles: str):
    """Run the named roles (:data:`service.runtime.roles.ROLES`) until the block exits
    (graceful stop); a role that fails cancels the test, and its error is raised."""
    stop = asyncio.Event()
    tasks = await start_roles(settings, store, roles, stop)
    test_task = asyncio.current_task()

    def fail_fast(task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            test_task.cancel()  # a role died: stop waiting; its error is raised below

    for t in tasks:
        t.add_done_callback(fail_fast)
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 30)


async def window_counts(store: Store, model_id: str) -> dict[int, int]:
    """Stored record count per window start of one model (versions summed)."""
    members = await store.window_members(model_id, 0, float("inf"))
    out: dict[int, int] = {}
    for p in await store.window_profiles(model_id, members):
        out[p.window_start] = out.get(p.window_start, 0) + p.count
    return out


async def dead_letters(settings: Settings, n: int, timeout: float = 30.0) -> list:
    """The first ``n`` messages of the dead-letter topic (``ConsumerRecord``s, headers as
    a dict), read from the beginning.

    Raises
    ------
    AssertionError
        If fewer than ``n`` arrive within ``timeout`` seconds.
    """
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(settings.dead_letter_topic, bootstrap_servers=settings.kafka_bootstrap,
                                auto_offset_reset="earliest", group_id=None,
                                fetch_max_bytes=64 * 1024 * 1024, max_partition_fetch_bytes=16 * 1024 * 1024)
    await consumer.start()
    out: list = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        while len(out) < n:
            assert loop.time() < deadline, f"{len(out)} of {n} dead letters arrived"
            for msgs in (await consumer.getmany(timeout_ms=500)).values():
                out += msgs
    finally:
        await consumer.stop()
    return out


def header(msg, name: str) -> str | None:
    """One header of a consumed message, decoded (None: absent)."""
    value = dict(msg.headers).get(name)
    return None if value is None else value.decode()
