"""The fleet overview's index in Redis: each model's columns and its latest window.

What the overview filters and sorts on for every model (owner, tier, window length, upstream
sources; the latest window with results and its status; that window's heatmap cells) is
written with the configuration and the results it comes from, and read in one round trip.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from service.profiles.keys import FLEET_COLUMNS, FLEET_LATEST, MODELS, config_key, heat_key, window_index_key
from service.registry import ModelConfig
from service.runtime.redis_client import Client, mget
from service.stored import read_stored


@dataclass(frozen=True)
class ModelColumns:
    """What the fleet overview shows, filters and sorts of one model's configuration."""

    owner: str | None = None
    tier: int = 2
    window_seconds: int = 300
    sources: tuple[str, ...] = ()

    @classmethod
    def of(cls, config: ModelConfig) -> ModelColumns:
        return cls(config.owner, config.tier, config.window_seconds,
                   tuple(sorted({d.source for d in config.features.values() if d.source})))

    def to_json(self) -> bytes:
        return orjson.dumps([self.owner, self.tier, self.window_seconds, self.sources])

    @classmethod
    def from_json(cls, raw: bytes) -> ModelColumns:
        owner, tier, seconds, sources = orjson.loads(raw)
        return cls(owner, tier, seconds, tuple(sources))


#: Status of a window from its results (``window_status``).
OK, INSUFFICIENT = "ok", "insufficient traffic"


@dataclass(frozen=True)
class LatestWindow:
    """A model's latest window with test results: its index member, start (Unix seconds)
    and status: ``"insufficient traffic"`` when every test had too little data (or
    failed), else ``"ok"``."""

    member: str
    start: int
    status: str

    def to_json(self) -> bytes:
        return orjson.dumps({"member": self.member, "start": self.start, "status": self.status})

    @classmethod
    def from_json(cls, raw: bytes) -> LatestWindow:
        d = orjson.loads(raw)
        return cls(d["member"], int(d["start"]), d["status"])


def window_status(results: list[dict[str, Any]]) -> str:
    """``"insufficient traffic"`` when no test of the window was decided (every one had
    too little data, or failed), else ``"ok"``.

    Examples
    --------
    >>> window_status([{"status": "insufficient_data"}, {"status": "error"}])
    'insufficient traffic'
    >>> window_status([{"status": "insufficient_data"}, {"status": "ok"}])
    'ok'
    """
    statuses = {r["status"] for r in results}
    return INSUFFICIENT if statuses <= {"insufficient_data", "error"} else OK


_RANK = {"ok": 0, "inconclusive": 1, "drift": 2, "breach": 3}


def heat_cells(results: list[dict[str, Any]]) -> dict[str, tuple[float | None, str]]:
    """Per feature of one window's results (window-level tests left out): the largest
    |effect| / floor of its checks (None when none has both) and the worst of their
    states: ``breach`` (drift with the effect at or past its floor), ``drift``,
    ``inconclusive`` (sketch error), ``ok``.

    Examples
    --------
    >>> heat_cells([{"feature": "x", "check": "psi", "status": "drift", "effect_size": 0.5, "floor": 0.2},
    ...             {"feature": "x", "check": "ks", "status": "drift", "effect_size": 0.1, "floor": 0.2},
    ...             {"feature": "y", "check": "psi", "status": "ok", "effect_size": None, "floor": 0.2},
    ...             {"feature": "", "check": "volume", "status": "drift", "effect_size": 1.0, "floor": 0.5}])
    {'x': (2.5, 'breach'), 'y': (None, 'ok')}
    """
    best: dict[str, float | None] = {}
    state: dict[str, str] = {}
    for r in results:
        f = r["feature"]
        if f == "":
            continue
        e, fl = r.get("effect_size"), r.get("floor") or 0.0
        rt = float(abs(e) / fl) if e is not None and fl > 0 else None  # numpy scalars too
        status = r["status"]
        flag = (("breach" if rt is not None and rt >= 1 else "drift") if status == "drift"
                else ("inconclusive" if status == "inconclusive" else "ok"))
        old = best.get(f)
        best[f] = rt if old is None else (old if rt is None else max(old, rt))
        if f not in state or _RANK[flag] > _RANK[state[f]]:
            state[f] = flag
    return {f: (best[f], state[f]) for f in best}


@dataclass(frozen=True)
class FleetIndex:
    """What the fleet overview reads of every model in one round trip: the model ids, their
    configuration's columns (the defaults when they have none) and their latest window
    with results (absent: none yet)."""

    models: list[str]
    columns: dict[str, ModelColumns]
    latest: dict[str, LatestWindow]


class FleetStore:
    """The fleet-overview half of :class:`~service.profiles.store.Store`."""

    r: Client

    # -- reads of the dashboard ------------------------------------------------------------
    async def fleet_index(self) -> FleetIndex:
        """Every model with its columns and latest window with results, in one round trip.

        Models whose columns are missing (configurations stored before the index existed)
        get them from their configuration, written back for the next read; a model
        without a configuration has the defaults' columns."""
        async with self.r.pipeline(transaction=False) as p:
            p.smembers(MODELS)
            p.hgetall(FLEET_COLUMNS)
            p.hgetall(FLEET_LATEST)
            ids_raw, cols_raw, latest_raw = await p.execute()
        ids = sorted(m.decode() for m in ids_raw)
        columns = {k.decode(): ModelColumns.from_json(v) for k, v in cols_raw.items()}
        latest = {k.decode(): LatestWindow.from_json(v) for k, v in latest_raw.items()}
        missing = [m for m in ids if m not in columns]
        if missing:
            columns |= await self._fill_fleet_columns(missing)
        return FleetIndex(ids, columns, latest)

    async def _fill_fleet_columns(self, model_ids: list[str]) -> dict[str, ModelColumns]:
        raws = await mget(self.r, [config_key(m) for m in model_ids])
        out = {}
        async with self.r.pipeline(transaction=False) as p:
            for m, raw in zip(model_ids, raws, strict=True):
                got = None if raw is None else read_stored(ModelConfig, raw, role="api", kind="model", key=m)
                out[m] = ModelColumns.of(got) if isinstance(got, ModelConfig) else ModelColumns()
                # Only where none are: put_model_config writes the configuration first and
                # its columns after, so a repair from an older configuration is either
                # refused here or overwritten by that write; it never outlives it.
                p.hsetnx(FLEET_COLUMNS, m, out[m].to_json())
            await p.execute()
        return out

    async def recent_and_heat(
        self, models: list[tuple[str, str | None]], n: int
    ) -> tuple[dict[str, list[tuple[str, int]]], dict[str, dict[str, tuple[float | None, str]]]]:
        """Per (model, member of its latest window with results, or None): its ``n`` latest
        closed windows (member, start; oldest first) and that window's heatmap cells
        (:func:`heat_cells`; empty when none or expired), in one round trip."""
        async with self.r.pipeline(transaction=False) as p:
            for m, member in models:
                p.zrange(window_index_key(m), -n, -1, withscores=True)
                if member is not None:
                    p.get(heat_key(m, member))
            got = iter(await p.execute())
        recent, heat = {}, {}
        for m, member in models:
            recent[m] = [(k.decode(), int(s)) for k, s in next(got)]
            raw = next(got) if member is not None else None
            heat[m] = {} if raw is None else {f: (r, st) for f, (r, st) in orjson.loads(raw).items()}
        return recent, heat
