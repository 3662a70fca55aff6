"""Stored configuration: one codec for every model written to Redis, and the second wall
for what does not read back.

Every configuration the service stores (model and detector configurations, silences,
receivers, API keys) is a :class:`~detectors.strict.StrictModel`, written as JSON by
:func:`encode_stored` -- which refuses to write a value that would not read back -- and
read by :func:`decode_stored`. A stored value can still fail to parse (written by hand,
by an older version, or damaged): :func:`read_stored` then logs it with its key, counts
it on ``fleetwatch_config_errors_total{role, kind}`` and answers :class:`Unreadable`
instead of raising, so one model's bad configuration never stops a role, and
:class:`ConfigCache` gives a worker the model's last good configuration (else the
defaults) in its place.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from service import metrics
from service.registry import ModelConfig

if TYPE_CHECKING:
    from service.profiles.store import Store
    from service.runtime.outage import RedisOutage
    from service.settings import Settings

log = logging.getLogger("fleetwatch.stored")

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Unreadable:
    """A stored configuration that does not parse.

    Attributes
    ----------
    error : str
        The first validation errors, ``"field.path: message"`` joined by ``"; "``.
    """

    error: str


def encode_stored(value: BaseModel, *, exclude_unset: bool = False,
                  context: dict[str, Any] | None = None) -> str:
    """The JSON written to Redis for ``value`` (``context``: the validation context it is
    read back with, see :func:`decode_stored`).

    Raises
    ------
    ValueError
        If the JSON would not read back as ``value`` (the edge validation let through
        a value JSON cannot carry): nothing is written then.

    Examples
    --------
    >>> from service.registry import ModelConfig
    >>> encode_stored(ModelConfig(window_seconds=60), exclude_unset=True)
    '{"window_seconds":60}'
    """
    raw = value.model_dump_json(exclude_unset=exclude_unset)
    try:
        back = decode_stored(type(value), raw, context)
    except ValidationError as exc:
        raise ValueError(f"{type(value).__name__} would not read back: {describe(exc)}") from None
    if back.model_dump() != value.model_dump():
        raise ValueError(f"{type(value).__name__} would not read back as written")
    return raw


def decode_stored(cls: type[M], raw: str | bytes, context: dict[str, Any] | None = None) -> M:
    """Parse a stored value (``context``: pydantic's validation context, e.g. the one that
    lets a stored matcher with a pattern RE2 refuses read back as unusable).

    Raises
    ------
    pydantic.ValidationError
        If ``raw`` is not valid JSON of ``cls``.
    """
    return cls.model_validate_json(raw, context=context)


def describe(exc: ValidationError, limit: int = 3) -> str:
    """The first ``limit`` errors of ``exc`` as ``"field.path: message"``, joined by ``"; "``."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                     for e in exc.errors()[:limit])


def read_stored(cls: type[M], raw: str | bytes, *, role: str, kind: str, key: str,
                context: dict[str, Any] | None = None) -> M | Unreadable:
    """Parse a stored value; one that does not parse is logged (with ``key``, e.g. the
    model id), counted under ``role`` and ``kind`` and answered as :class:`Unreadable`.

    Examples
    --------
    >>> from service.registry import ModelConfig
    >>> read_stored(ModelConfig, '{"window_seconds": null}', role="api", kind="model", key="m")
    Unreadable(error='window_seconds: Input should be a valid integer')
    """
    try:
        return decode_stored(cls, raw, context)
    except ValidationError as exc:
        metrics.CONFIG_ERRORS.labels(role=role, kind=kind).inc()
        error = describe(exc)
        log.error("stored %s configuration of %r does not parse (%s); %s uses its last good "
                  "configuration or the defaults until it is replaced", kind, key, error, role)
        return Unreadable(error)


class ConfigCache(Generic[M]):
    """A role's view of the models' stored configurations of one kind.

    Parameters
    ----------
    load : async callable
        Model ids -> {model id: parsed configuration, :class:`Unreadable` or None (none
        stored)}.
    default : callable
        Model id -> the configuration of a model that has none (and of one whose
        configuration is unreadable and that has no last good one).
    ttl : float
        Seconds a configuration read is reused before it is read again (0: every time).

    Notes
    -----
    A model whose stored configuration becomes unreadable keeps the last configuration
    that parsed in this process; a model first seen unreadable gets ``default``.
    """

    def __init__(self, load: Callable[[list[str]], Awaitable[dict[str, M | Unreadable | None]]],
                 default: Callable[[str], M], ttl: float) -> None:
        self.load = load
        self.default = default
        self.ttl = ttl
        self._read: dict[str, float] = {}
        self._good: dict[str, M] = {}

    async def get(self, model_ids: Iterable[str]) -> dict[str, M]:
        """Each model's configuration (read again when older than ``ttl``)."""
        ids = list(dict.fromkeys(model_ids))
        now = time.monotonic()
        stale = [m for m in ids if self.ttl <= 0 or now - self._read.get(m, -math.inf) > self.ttl]
        if stale:
            for m, cfg in (await self.load(stale)).items():
                self._read[m] = now
                if cfg is None:
                    self._good[m] = self.default(m)
                elif isinstance(cfg, Unreadable):
                    self._good.setdefault(m, self.default(m))
                else:
                    self._good[m] = cfg
        return {m: self._good[m] for m in ids}

    async def one(self, model_id: str) -> M:
        """:meth:`get` of one model."""
        return (await self.get([model_id]))[model_id]


def model_configs(store: Store, settings: Settings, role: str, outage: RedisOutage | None = None,
                  ttl: float | None = None) -> ConfigCache[ModelConfig]:
    """A role's cache of the models' stored configurations (:class:`ConfigCache`): a model
    that has none gets ``ModelConfig(window_seconds=settings.window_seconds)``.

    Parameters
    ----------
    store : Store
    settings : Settings
        ``window_seconds`` (the default window), ``config_ttl_seconds``.
    role : str
        Whose reads they are (``fleetwatch_config_errors_total{role}``).
    outage : RedisOutage, optional
        Retry each read while Redis cannot serve (else a read raises).
    ttl : float, optional
        Seconds a read is reused (default ``settings.config_ttl_seconds``; 0: every time).
    """
    def load(ids: list[str]) -> Awaitable[dict[str, ModelConfig | Unreadable | None]]:
        if outage is None:
            return store.model_configs(ids, role)
        return outage.call(lambda: store.model_configs(ids, role), "model configurations")

    return ConfigCache(load, lambda _m: ModelConfig(window_seconds=settings.window_seconds),
                       settings.config_ttl_seconds if ttl is None else ttl)
