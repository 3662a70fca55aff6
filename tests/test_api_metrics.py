"""/metrics parsed with prometheus_client's parser: names, types, label sets, and the
alert gauges read from Redis (bounded: open alerts only)."""

from __future__ import annotations

import re

import httpx
from prometheus_client.parser import text_string_to_metric_families

from service.api.app import create_app
from tests.test_alerting_policy import BREACH, HEALTHY, apply, policy

NAME = re.compile(r"fleetwatch_[a-z0-9_]+")


async def scrape(settings, store) -> dict:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(settings, store)),
                                 base_url="http://t") as http:
        resp = await http.get("/metrics")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    return {f.name: f for f in text_string_to_metric_families(resp.text) if f.name.startswith("fleetwatch")}


def value(family, **labels) -> float | None:
    got = [s.value for s in family.samples if s.labels == labels and not s.name.endswith("_created")]
    return got[0] if got else None


async def test_metrics_follow_prometheus_conventions(settings, store):
    families = await scrape(settings, store)
    assert len(families) > 30
    for name, f in families.items():
        assert NAME.fullmatch(name), name
        assert f.type in ("counter", "gauge", "histogram"), (name, f.type)
        if f.type == "counter":  # the parser strips _total from a counter family's name
            assert all(s.name in (f"{name}_total", f"{name}_created") for s in f.samples), name
        if f.type == "histogram":
            assert name.endswith("_seconds"), name  # durations in base units
        for s in f.samples:  # bounded label sets: never a record, prediction or window id
            assert not set(s.labels) & {"prediction_id", "window", "member", "alert_id", "id"}, s
    assert families["fleetwatch_fdr_alpha_wealth"].type == "gauge"
    assert families["fleetwatch_alerts_raised"].type == "counter"
    assert {tuple(sorted(s.labels)) for s in families["fleetwatch_alerts_open"].samples} == {
        ("severity", "state")}


async def test_open_alerts_by_state_and_severity_and_their_effect(settings, store):
    p = policy(store)
    for i in (0, 1):
        await apply(p, "m", i, {("x", "psi"): BREACH})
    families = await scrape(settings, store)
    assert value(families["fleetwatch_alerts_open"], state="firing", severity="critical") == 1
    assert value(families["fleetwatch_alert_effect_size"], model="m", feature="x", check="psi") == 1.0
    for i in (2, 3, 4):  # resolves: the gauges drop it
        await apply(p, "m", i, {("x", "psi"): HEALTHY})
    families = await scrape(settings, store)
    assert value(families["fleetwatch_alerts_open"], state="firing", severity="critical") == 0
    assert value(families["fleetwatch_alert_effect_size"], model="m", feature="x", check="psi") is None
