"""The fleet overview's index on a real Redis: what it reads for every model is written with
configurations, results and alerts, so a request costs the same number of Redis commands
whatever the fleet's size; server-side filters, sorts and pages over every model; repair
of data stored before the index existed."""

from __future__ import annotations

import re
from dataclasses import asdict

import httpx
import numpy as np
import pytest

from detectors.result import insufficient, judged
from service.alerting.keys import OPEN, OPEN_INDEX
from service.alerting.policy import resolve_by_user
from service.alerting.store import AlertStore, OpenAlert
from service.api.app import create_app
from service.profiles import fleet
from service.profiles.fleet import ModelColumns
from service.profiles.keys import FLEET_COLUMNS, FLEET_LATEST, config_key, window_member
from service.profiles.results import COUNTS_KEPT, COUNTS_TRIM_AT
from service.registry import ModelConfig
from tests.test_alerting_policy import BREACH, HEALTHY, T0, W, apply, policy

OWNERS = ("ads", "fraud", "search")


def config(i: int) -> ModelConfig:
    return ModelConfig.model_validate({
        "owner": OWNERS[i % 3], "tier": 1 + i % 3,
        "features": {"x": {"type": "numeric", "source": f"src{i % 4}"}, "y": {"type": "numeric"}},
    })


def stored(results) -> list[dict]:
    return [{**asdict(r), "baseline": "reference"} for r in results]


def decided(effect: float = 0.05) -> list[dict]:
    return stored([judged("psi", "x", effect, effect, 0.5, 1000, 1000, floor=0.2),
                   judged("psi", "y", 0.01, 0.01, 0.9, 1000, 1000, floor=0.2)])


def starved() -> list[dict]:
    return stored([insufficient("psi", f, 3, 1000, "too few") for f in ("x", "y")])


def client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://fw.test")


def listed(html: str) -> list[str]:
    """Model ids of the overview's table rows, in order."""
    table = html.split('<table class="fleet">', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<th scope="row"><a href="/ui/models/[^"]+">([^<]+)</a>', table)


async def commands(store) -> int:
    return sum(int(v["calls"]) for k, v in (await store.r.info("commandstats")).items()
               if k.startswith("cmdstat_"))


async def fleet_of(store, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        m = f"m{i:03d}"
        await store.put_model_config(m, config(i))
        await store.put_results(m, window_member(W, T0, "1"), starved() if i % 5 == 0 else decided(), 3600)


async def test_overview_commands_do_not_grow_with_the_fleet(settings, store):
    """The overview used to send a few Redis commands per model of the fleet (its latest
    window, its configuration, each open alert's body); now it reads the index."""
    app = create_app(settings, store)
    used = []
    async with client(app) as http:
        for n in (60, 240):
            await fleet_of(store, n - (0 if not used else 60), 0 if not used else 60)
            await http.get("/ui")  # warm: window counts cached, scripts loaded
            await store.r.config_resetstat()
            got = await http.get("/ui?sort=model")
            used.append(await commands(store) - 1)  # less the INFO itself
            assert got.status_code == 200 and f"{n} models" in got.text
    assert used[0] == used[1], used


async def test_filters_sorts_and_pages_run_over_every_model(settings, store):
    await fleet_of(store, 130)
    p = policy(store)
    for i in (7, 10):  # two models with an open critical alert (tier 2: effect 5x the floor)
        for w in range(2):
            await apply(p, f"m{i:03d}", w, {("x", "psi"): BREACH}, config(i))
    ids = [f"m{i:03d}" for i in range(130)]
    async with client(create_app(settings, store)) as http:
        pages = [listed((await http.get(f"/ui?sort=owner&page={k}")).text) for k in (1, 2, 3)]
        by_owner = sorted(ids, key=lambda m: (OWNERS[int(m[1:]) % 3], m))
        assert [len(x) for x in pages] == [50, 50, 30] and sum(pages, []) == by_owner
        desc = listed((await http.get("/ui?sort=model&desc=1")).text)
        assert desc == sorted(ids, reverse=True)[:50]
        none = await http.get("/ui?tier=3&owner=ads")  # owner ads models are tier 1
        assert listed(none.text) == [] and "No model matches" in none.text
        fraud1 = listed((await http.get("/ui?owner=fraud&tier=2&sort=model")).text)
        assert fraud1 == [m for m in ids if int(m[1:]) % 3 == 1]
        src = listed((await http.get("/ui?source=src3&sort=model")).text)
        assert src == [m for m in ids if int(m[1:]) % 4 == 3]
        first = listed((await http.get("/ui")).text)  # default: health, worst first
        assert first[:2] == ["m007", "m010"]
        crit = await http.get("/ui?health=critical")
        assert listed(crit.text) == ["m007", "m010"] and "2 matching" in crit.text
        q = listed((await http.get("/ui?q=M12&sort=model")).text)
        assert q == [f"m12{d}" for d in range(10)]


async def test_health_insufficient_traffic_is_known_for_every_model_before_filtering(settings, store):
    """A model whose latest window had too little data to test reads "insufficient traffic":
    the overview knew it only for the rows of the page it had already chosen, so filtering
    on it found nothing and the counts called those models ok."""
    await fleet_of(store, 12)
    starving = [f"m{i:03d}" for i in range(12) if i % 5 == 0]
    async with client(create_app(settings, store)) as http:
        got = await http.get("/ui", params={"health": "insufficient traffic", "sort": "model"})
        assert listed(got.text) == starving
        assert re.search(r"insufficient traffic</span> 3\b", got.text), got.text[:2000]


async def test_latest_window_never_moves_back_and_heat_cells_are_stored_with_results(store):
    await store.put_model_config("m", config(1))
    late, early = window_member(W, T0 + W, "1"), window_member(W, T0, "1")
    await store.put_results("m", late, decided(0.5), 3600)
    await store.put_results("m", early, starved(), 3600)  # evaluated after: a redelivered event
    index = await store.fleet_index()
    assert (index.latest["m"].member, index.latest["m"].status) == (late, "ok")
    _recent, heat = await store.recent_and_heat([("m", late)], 4)
    assert heat["m"] == {"x": (2.5, "ok"), "y": (pytest.approx(0.05), "ok")}  # p 0.5: not drift
    numpy_valued = [{**r, "effect_size": np.float64(r["effect_size"]), "floor": np.float32(0.2)}
                    for r in decided(0.5)]
    await store.put_results("m", window_member(W, T0 + 2 * W, "1"), numpy_valued, 3600)  # stored as well
    assert (await store.fleet_index()).latest["m"].start == T0 + 2 * W
    assert await store.r.ttl(f"fw:{{m}}:heat:{late}") > 3000
    await store.delete_model("m")
    assert not await store.r.hexists(FLEET_LATEST, "m") and not await store.r.hexists(FLEET_COLUMNS, "m")


async def test_open_index_follows_the_policy_and_the_users_resolution(store):
    p, alerts = policy(store), AlertStore(store.r)
    cfg = ModelConfig.model_validate({"tier": 1, "features": {"x": {"type": "numeric", "source": "feed"}}})
    for w in range(2):
        await apply(p, "m", w, {("x", "psi"): BREACH}, cfg)
    [a] = await alerts.alerts(None, 0, 10)
    assert await alerts.open_index() == {a.id: OpenAlert("m", a.severity, a.incident_id)}
    assert a.incident_id
    await resolve_by_user(alerts, a, "alice", None, 1e9)
    assert await alerts.open_index() == {} and not await store.r.sismember(OPEN, a.id)
    # the policy writing the user-resolved alert again does not reopen it
    await alerts.set_open(await alerts.alert(a.id), True)
    assert await alerts.open_index() == {} and await alerts.open_alerts() == []
    await apply(p, "m", 2, {("x", "psi"): HEALTHY}, cfg)
    assert await alerts.open_index() == {}


async def test_index_is_filled_in_for_data_stored_before_it(settings, store, monkeypatch):
    """Configurations and open alerts written by a version without the index."""
    await store.put_model_config("old", config(2))
    await store.r.hdel(FLEET_COLUMNS, "old")
    await store.r.sadd("{fw}:models", "implicit")  # created by its records: no configuration
    p, alerts = policy(store), AlertStore(store.r)
    for w in range(2):
        await apply(p, "old", w, {("x", "psi"): BREACH}, config(2))
    [a] = await alerts.alerts(None, 0, 10)
    await store.r.delete(OPEN_INDEX)
    index = await store.fleet_index()
    assert index.columns["old"] == ModelColumns("search", 3, 300, ("src2",))
    assert index.columns["implicit"] == ModelColumns()
    assert ModelColumns.from_json(await store.r.hget(FLEET_COLUMNS, "old")) == index.columns["old"]
    assert (await alerts.open_index())[a.id].model_id == "old"
    assert await store.r.hexists(OPEN_INDEX, a.id)
    # a repair never overwrites columns written since it read the configuration
    raw = await store.r.get(config_key("old"))
    await store.put_model_config("old", config(0))

    async def read_before_the_write(_r, _keys):
        return [raw]

    monkeypatch.setattr(fleet, "mget", read_before_the_write)
    assert (await store._fill_fleet_columns(["old"]))["old"].owner == "search"  # what it read
    assert ModelColumns.from_json(await store.r.hget(FLEET_COLUMNS, "old")).owner == "ads"


@pytest.mark.parametrize("health", ["critical", "no data"])
async def test_health_of_a_model_without_results_or_with_an_alert(settings, store, health):
    await store.put_model_config("a", config(0))
    if health == "critical":
        p = policy(store)
        for w in range(2):
            await apply(p, "a", w, {("x", "psi"): BREACH}, ModelConfig(tier=1))
    async with client(create_app(settings, store)) as http:
        got = await http.get("/ui", params={"health": health})
        assert listed(got.text) == ["a"]


async def test_results_cache_the_windows_record_count_and_old_counts_are_dropped(store):
    members = [window_member(W, T0 + i * W, "1") for i in range(COUNTS_TRIM_AT + 10)]
    await store.r.zadd("fw:{m}:idx", {k: T0 + i * W for i, k in enumerate(members)})
    await store.put_results("m", members[0], decided(), 3600, count=17)
    assert await store.window_counts("m", members[:1]) == [17]  # no profile needed
    await store.r.hset("fw:{m}:counts", mapping=dict.fromkeys(members[1:COUNTS_TRIM_AT], 1))
    await store.put_results("m", members[-1], decided(), 3600, count=5)
    kept = {k.decode() for k in await store.r.hkeys("fw:{m}:counts")}
    assert kept == {members[-1]} | set(members[-COUNTS_KEPT:]) & set(members[:COUNTS_TRIM_AT])
    assert len(kept) <= COUNTS_KEPT
