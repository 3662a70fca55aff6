"""The API during a Redis outage: every Redis-backed /v1 route, and authentication by a
stored key, answer 503 with the error body and Retry-After, never 500 (a real Redis that
is stopped)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest
import pytest_asyncio

from service.api.app import create_app
from service.embedded import redis_server
from service.profiles.store import Store
from service.settings import Settings

ADMIN = "a" * 40
MODEL = {"model_id": "outage-m", "tier": 1}
SILENCE = {"matchers": [{"name": "model", "value": "outage-m"}], "created_by": "ana", "comment": "c",
           "ends_at": (datetime.now(UTC) + timedelta(hours=1)).isoformat()}
RECEIVER = {"name": "r", "kind": "webhook", "url": "https://93.184.216.34/hook", "secret": "s" * 16}

# A representative request per router (reads and writes, lists and single items).
ROUTES = [
    ("GET", "/v1/models", None),
    ("POST", "/v1/models", {"model_id": "outage-new", "tier": 1}),
    ("PUT", "/v1/models/outage-m", {"tier": 2}),
    ("GET", "/v1/models/outage-m/profiles", None),
    ("GET", "/v1/models/outage-m/drift", None),
    ("GET", "/v1/models/outage-m/detector-config", None),
    ("PUT", "/v1/models/outage-m/detector-config", {"floors": {"psi": 0.3}}),
    ("GET", "/v1/models/outage-m/performance", None),
    ("GET", "/v1/alerts", None),
    ("GET", "/v1/alerts/5f0c1e9a2b7d4c3e", None),
    ("POST", "/v1/alerts/5f0c1e9a2b7d4c3e/ack", {"by": "ana"}),
    ("GET", "/v1/incidents", None),
    ("GET", "/v1/incidents/9a7b3c1d2e4f5a6b", None),
    ("POST", "/v1/silences", SILENCE),
    ("GET", "/v1/silences", None),
    ("DELETE", "/v1/silences/4d2c0f6e8a9b41c7a3e5d1f0b2c4e6a8", None),
    ("POST", "/v1/receivers", RECEIVER),
    ("GET", "/v1/receivers", None),
    ("GET", "/v1/notifications", None),
    ("GET", "/v1/keys", None),
    ("POST", "/v1/keys", {"name": "k", "scope": "read"}),
]


@pytest_asyncio.fixture(scope="module")
async def outage(tmp_path_factory: pytest.TempPathFactory):
    """A Redis that held a model and a stored key, then stopped: yields (settings, store, token)."""
    server = redis_server(tmp_path_factory.mktemp("redis-outage"))
    server.start()
    settings = Settings(redis_url=f"redis://127.0.0.1:{server.port}/0", api_auth=True, api_admin_key=ADMIN)
    store = Store(settings.redis_url)
    app = create_app(settings, store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t",
                                 headers={"Authorization": f"Bearer {ADMIN}"}) as http:
        assert (await http.post("/v1/models", json=MODEL)).status_code == 201
        key = await http.post("/v1/keys", json={"name": "ops", "scope": "admin"})
        assert key.status_code == 201
    server.stop()
    yield settings, store, key.json()["token"]
    server.kill()
    await store.close()


def client(settings: Settings, store: Store, token: str | None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(settings, store)),
                             base_url="http://t", headers=headers)


def assert_unavailable(resp: httpx.Response, what: str) -> None:
    assert resp.status_code == 503, (what, resp.status_code, resp.text)
    assert resp.headers["content-type"] == "application/json", what
    body = resp.json()
    assert body["code"] == "redis_unavailable" and body["field"] is None, (what, body)
    assert "Redis" in body["message"], (what, body)
    assert int(resp.headers["retry-after"]) >= 1, what


@pytest.mark.parametrize("auth", ["off", "stored key", "bootstrap key"])
async def test_redis_backed_routes_answer_503_with_retry_after(outage, auth: str):
    settings, store, token = outage
    if auth == "off":
        settings, token = settings.model_copy(update={"api_auth": False}), None
    elif auth == "bootstrap key":
        token = ADMIN  # authenticates without Redis; the route itself then needs it
    async with client(settings, store, token) as http:
        # every route without authentication; a sample of them through either kind of key
        for method, path, body in ROUTES if auth == "off" else ROUTES[::4]:
            resp = await http.request(method, path, json=body)
            assert_unavailable(resp, f"{auth}: {method} {path}")


async def test_authentication_without_redis(outage):
    settings, store, token = outage
    async with client(settings, store, None) as http:
        # no key at all: refused without asking Redis
        resp = await http.get("/v1/models")
        assert resp.status_code == 401 and resp.json()["code"] == "unauthenticated"
        # a stored key cannot be checked: 503, not 401 (the key may be valid) and not 500
        for candidate in (token, "fwk_0123456789abcdef_" + "x" * 43):
            resp = await http.get("/v1/models", headers={"X-API-Key": candidate})
            assert_unavailable(resp, candidate[:12])
        # what needs no Redis keeps answering
        assert (await http.get("/healthz")).status_code == 503
        assert (await http.get("/metrics")).status_code == 200
        assert (await http.get("/openapi.json")).status_code == 200


def test_503_is_documented_on_every_v1_operation(outage):
    settings, store, _token = outage
    schema = create_app(settings, store).openapi()
    for path, item in schema["paths"].items():
        if not path.startswith("/v1"):
            continue
        for method, operation in item.items():
            answer = operation["responses"].get("503")
            assert answer is not None, (method, path)
            assert "Retry-After" in answer.get("headers", {}), (method, path)
