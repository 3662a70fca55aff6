"""The one registry of roles, and running them in one process.

Each role is a :class:`Role`: its name (as in logs, metrics and deploy/), the
``fleetwatch`` sub-command that runs it alone, and the class that runs it (imported when
the role starts, so the CLI and this registry load no server package). ``fleetwatch run``
runs all of :data:`ROLES`, ``fleetwatch <command>`` one; the demo, the simulator and the
tests start roles through :func:`start_roles` / :func:`run_roles` (in this process) or as
``fleetwatch <command>`` in a child process configured by
:func:`service.settings.environment`.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from service.settings import Settings

log = logging.getLogger("fleetwatch.runtime")

if TYPE_CHECKING:
    from service.profiles.store import Store


class Runner(Protocol):
    """A running role: works until ``stop`` is set, then shuts down gracefully."""

    def run(self, stop: asyncio.Event) -> Coroutine[Any, Any, None]: ...


@dataclass(frozen=True)
class Role:
    """One role of the service.

    Attributes
    ----------
    name : str
        As in logs, metrics (``role`` labels) and deploy/ (``fleetwatch-<name>``).
    command : str
        The ``fleetwatch`` sub-command that runs it alone.
    help : str
        That sub-command's help.
    runner : str
        ``"module:Class"``: called with ``(settings, store)``, it gives the role's
        :class:`Runner`.
    topics : bool
        It consumes Kafka topics, created (:func:`service.kafka.ensure_topics`) before it starts.
    """

    name: str
    command: str
    help: str
    runner: str
    topics: bool = False

    def build(self, settings: Settings, store: Store) -> Runner:
        """The role's runner (its module is imported now)."""
        module, attr = self.runner.split(":")
        return getattr(importlib.import_module(module), attr)(settings, store)


#: Every role, in start order (``fleetwatch run`` runs them all).
ROLES: dict[str, Role] = {r.name: r for r in (
    Role("aggregator", "aggregate", "The aggregator role: Kafka predictions -> window profiles in Redis.",
         "service.profiles.aggregator:Aggregator", topics=True),
    Role("detector", "detect", "The detector role: closed windows -> drift and data-quality alerts.",
         "service.detection.detector:Detector"),
    Role("joiner", "join",
         "The label-joiner role: delayed labels -> performance cohorts -> performance alerts.",
         "service.cohorts.joiner:Joiner", topics=True),
    Role("notifier", "notify",
         "The notifier role: alert events -> receivers (webhook, Slack, PagerDuty, Alertmanager).",
         "service.paging.notifier:Notifier"),
    Role("api", "serve", "The API role (FastAPI on FLEETWATCH_LISTEN_HOST:FLEETWATCH_API_PORT).",
         "service.api.server:ApiServer"),
)}


def role(name: str) -> Role:
    """The role of a name or of a sub-command.

    Raises
    ------
    KeyError
        If no role has that name or command.

    Examples
    --------
    >>> role("join").name, role("joiner").command
    ('joiner', 'join')
    """
    for r in ROLES.values():
        if name in (r.name, r.command):
            return r
    raise KeyError(f"no role {name!r}; roles: {', '.join(ROLES)}")


async def start_roles(settings: Settings, store: Store, names: Iterable[str], stop: asyncio.Event,
                      built: Mapping[str, Runner] | None = None) -> list[asyncio.Task[None]]:
    """Start the named roles (names or commands, run in :data:`ROLES` order) as tasks that
    run until ``stop`` is set; the topics are created first when a role consumes them.

    Parameters
    ----------
    built : mapping, optional
        Roles the caller built itself (e.g. an ``ApiServer`` on a chosen port), by name;
        the others are built here.

    Raises
    ------
    KeyError
        If a name is no role.
    """
    from service.kafka import ensure_topics

    wanted = {role(n).name for n in names}
    built = built or {}
    if any(ROLES[n].topics for n in wanted):
        await ensure_topics(settings)
    tasks = []
    for n, r in ROLES.items():
        if n in wanted:
            runner = built[n] if n in built else r.build(settings, store)
            tasks.append(asyncio.create_task(runner.run(stop), name=f"role:{n}"))
    return tasks


async def run_roles(settings: Settings, roles: Iterable[str], stop: asyncio.Event,
                    built: Mapping[str, Runner] | None = None) -> None:
    """Run the given roles until ``stop`` is set, or until one of them fails: then every
    role is stopped and the error raised. Each shuts down gracefully."""
    from service.profiles.store import Store

    store = Store(settings.redis_url, settings.redis_cluster)
    try:
        await upgrade_key_layout(store, settings)
        tasks = await start_roles(settings, store, roles, stop, built)
        done, _pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for t in done:
            if t.exception() is not None:
                raise t.exception()
    finally:
        await store.close()


async def upgrade_key_layout(store, settings: Settings) -> None:
    """Rename the keys of an older layout (:meth:`~service.profiles.store.Store.upgrade_key_layout`),
    retried while Redis cannot serve; logged when it renamed any."""
    from service.runtime.outage import RedisOutage

    n = await RedisOutage(settings, "startup").call(store.upgrade_key_layout, "upgrade key layout")
    if n:
        log.info("renamed %d fleet-wide keys to the hash-tagged layout ({fw}:...)", n)
