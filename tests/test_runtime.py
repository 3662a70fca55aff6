"""service/runtime: the registry of roles is what the CLI offers, settings survive the trip
to a child process's environment, and the Redis-outage policy retries only outages."""

from __future__ import annotations

import asyncio
import importlib
import os

import pytest
from prometheus_client import REGISTRY
from redis.exceptions import BusyLoadingError, ReadOnlyError, ResponseError
from typer.main import get_command

from service.cli import app
from service.runtime.outage import RedisOutage
from service.runtime.roles import ROLES, role
from service.settings import Settings, environment


def test_every_role_is_a_cli_sub_command_with_its_help():
    commands = get_command(app).commands
    for r in ROLES.values():
        assert commands[r.command].help == r.help, r.name
    assert {"run", *(r.command for r in ROLES.values())} <= set(commands)


def test_roles_are_found_by_name_or_command_and_an_unknown_one_is_refused():
    assert [role(r.command) for r in ROLES.values()] == list(ROLES.values())
    with pytest.raises(KeyError, match="no role 'scheduler'"):
        role("scheduler")


def test_every_role_builds_from_its_runner_path():
    for r in ROLES.values():
        module, attr = r.runner.split(":")
        assert callable(getattr(importlib.import_module(module), attr)), r.name


def test_settings_read_back_from_their_environment(monkeypatch):
    s = Settings(window_seconds=3600, redis_url="redis://x:1/0", api_admin_key="a" * 32,
                 metrics_token="t" * 32, receiver_allow_nets=["10.0.0.0/8"], api_auth=True,
                 fdr_max_tests_per_window=40, embedded_broker_storage="memory")
    env = environment(s, base={"PATH": "/bin", "FLEETWATCH_ALPHA": "0.5"})
    for k in list(os.environ):
        if k.startswith("FLEETWATCH_"):
            monkeypatch.delenv(k)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert Settings() == s
    assert env["PATH"] == "/bin" and "FLEETWATCH_KAFKA_BOOTSTRAP" not in env  # None: unset


def errors() -> float:
    return REGISTRY.get_sample_value("fleetwatch_redis_errors_total")


async def test_outage_policy_retries_outages_until_they_end_and_raises_anything_else():
    outage = RedisOutage(Settings(redis_retry_base_seconds=0.001, redis_retry_max_seconds=0.004), "test")
    failures = [ConnectionRefusedError("down"), BusyLoadingError("loading"), ReadOnlyError("failover")]
    calls = 0

    async def op() -> str:
        nonlocal calls
        calls += 1
        if failures:
            raise failures.pop(0)
        return "stored"

    before = errors()
    assert await outage.call(op, "write") == "stored"
    assert calls == 4 and outage.failed_total == 3 and outage.failures == 0
    assert errors() == before + 3
    assert [outage.delay(a) for a in (1, 2, 3, 4, 10)] == [0.001, 0.002, 0.004, 0.004, 0.004]

    async def wrong() -> None:
        raise ResponseError("WRONGTYPE")  # a wrong request, not an outage: never retried

    with pytest.raises(ResponseError):
        await outage.call(wrong, "read")
    assert outage.failed_total == 3


async def test_a_pause_ends_early_when_the_role_is_told_to_stop():
    outage = RedisOutage(Settings(redis_retry_base_seconds=60.0, redis_retry_max_seconds=60.0), "test")
    halt = asyncio.Event()
    halt.set()
    await asyncio.wait_for(outage.pause(ConnectionRefusedError("down"), "read", halt), 5)
    assert outage.failures == 1
