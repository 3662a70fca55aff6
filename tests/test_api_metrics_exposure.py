"""Who sees what of /metrics: with FLEETWATCH_API_AUTH on, series labelled by model only
behind FLEETWATCH_METRICS_TOKEN; every role's ports listen on FLEETWATCH_LISTEN_HOST
(loopback by default)."""

from __future__ import annotations

import socket
import urllib.request

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from service.api.app import create_app
from service.embedded import free_port
from service.runtime.infrastructure import start_metrics_server
from service.settings import Settings
from tests.test_alerting_policy import BREACH, apply, policy

pytestmark = pytest.mark.integration  # serves and scrapes metrics ports

TOKEN = "t" * 40
EFFECT = "fleetwatch_alert_effect_size"


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def model_labelled(text: str) -> list:
    """Samples whose labels name a model or a feature."""
    return [s for f in families(text).values() for s in f.samples if {"model", "feature"} & set(s.labels)]


async def scrape(settings: Settings, store, authorization: str | None = None) -> httpx.Response:
    headers = {"Authorization": authorization} if authorization else {}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(settings, store)),
                                 base_url="http://t") as http:
        return await http.get("/metrics", headers=headers)


@pytest.fixture
async def firing(settings, store):
    """One open alert of model m, feature x (an effect-size series exists)."""
    p = policy(store)
    for i in (0, 1):
        await apply(p, "m", i, {("x", "psi"): BREACH})
    return settings


async def test_auth_off_serves_every_series(firing, store):
    resp = await scrape(firing, store)
    assert resp.status_code == 200
    assert [s.labels for s in families(resp.text)[EFFECT].samples] == [
        {"model": "m", "feature": "x", "check": "psi"}]


async def test_auth_on_serves_model_series_only_with_the_scrape_token(firing, store):
    on = firing.model_copy(update={"api_auth": True, "metrics_token": SecretStr(TOKEN)})
    # no token (a probe, an unconfigured scrape): fleet-level series, no model data
    open_ = await scrape(on, store)
    assert open_.status_code == 200
    assert model_labelled(open_.text) == [] and EFFECT not in families(open_.text)
    fleet = families(open_.text)
    assert sum(s.value for s in fleet["fleetwatch_alerts_open"].samples) == 1  # still counted
    # the scrape token: everything
    full = await scrape(on, store, f"Bearer {TOKEN}")
    assert full.status_code == 200
    assert [s.labels["model"] for s in model_labelled(full.text)] == ["m"]
    # a wrong token, or an API key, is refused rather than silently given less
    for wrong in (f"Bearer {TOKEN}x", "Bearer " + "a" * 40):
        resp = await scrape(on, store, wrong)
        assert resp.status_code == 401 and resp.json()["code"] == "unauthenticated"
        assert resp.headers["www-authenticate"] == "Bearer"


async def test_auth_on_without_a_token_configured_never_serves_model_series(firing, store):
    on = firing.model_copy(update={"api_auth": True})
    assert model_labelled((await scrape(on, store)).text) == []
    assert (await scrape(on, store, f"Bearer {TOKEN}")).status_code == 401


def _worker_scrape(settings: Settings) -> tuple[tuple, str]:
    server = start_metrics_server(settings)
    try:
        host, port = server.server_address[:2]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            return (host, port), resp.read().decode()
    finally:
        server.shutdown()
        server.server_close()


def test_worker_metrics_port_listens_on_loopback_by_default():
    assert Settings().listen_host == "127.0.0.1"
    (host, port), _text = _worker_scrape(Settings(metrics_port=free_port()))
    assert host == "127.0.0.1"
    # the same single setting opens it to other hosts (what deploy/ sets in containers)
    (host, _port), _text = _worker_scrape(Settings(metrics_port=free_port(), listen_host="0.0.0.0"))
    assert host == "0.0.0.0"


def test_listen_host_reads_its_former_name(monkeypatch):
    monkeypatch.setenv("FLEETWATCH_API_HOST", "0.0.0.0")
    assert Settings().listen_host == "0.0.0.0"
    monkeypatch.setenv("FLEETWATCH_LISTEN_HOST", "127.0.0.2")
    assert Settings().listen_host == "127.0.0.2"


async def test_worker_port_leaves_model_series_out_when_auth_is_on(firing, store):
    # the API process filled the effect gauge (this process' registry)
    assert (await scrape(firing, store)).status_code == 200
    _addr, text = _worker_scrape(Settings(metrics_port=free_port()))
    assert [s.labels["model"] for s in model_labelled(text)] == ["m"]
    _addr, text = _worker_scrape(Settings(metrics_port=free_port(), api_auth=True))
    assert model_labelled(text) == [] and "fleetwatch_records_consumed_total" in text


def _outward_address() -> str | None:
    """This machine's non-loopback IPv4 address (the source of a route outward), if any."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.254", 9))  # no packet is sent: only the route is looked up
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if address.startswith("127.") else address


def test_loopback_port_is_not_reachable_on_other_addresses():
    other = _outward_address()
    if other is None:
        pytest.skip("no non-loopback IPv4 address on this machine")
    server = start_metrics_server(Settings(metrics_port=free_port()))
    try:
        with pytest.raises(OSError), socket.create_connection((other, server.server_address[1]), 2):
            pass
    finally:
        server.shutdown()
        server.server_close()
