"""API keys, scopes and request size limits on a real Redis."""

from __future__ import annotations

import hashlib
import hmac
import json

import httpx
import pytest
from pydantic import SecretStr

from service.api.app import create_app
from service.api.auth import KEYS, ApiKeyStore, Scope, key_id_of, token_sha256
from service.registry import ModelConfig

ADMIN = "bootstrap-admin-key-0123456789abcdef"  # >= 32 characters
LIMIT = 4_096
REFERENCE_LIMIT = 64 * 1_024


def secured(settings, **over):
    return settings.model_copy(update={
        "api_auth": True, "api_admin_key": SecretStr(ADMIN), "api_max_body_bytes": LIMIT,
        "api_max_reference_body_bytes": REFERENCE_LIMIT, **over})


def client(settings, store) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(settings, store)),
                             base_url="http://t")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


SILENCE = {"matchers": [{"name": "model", "value": "fraud"}], "ends_at": "2999-01-01T00:00:00Z",
           "created_by": "ana", "comment": "retraining"}


async def new_key(http: httpx.AsyncClient, scope: str, name: str | None = None) -> dict:
    resp = await http.post("/v1/keys", json={"name": name or f"{scope} key", "scope": scope},
                           headers=bearer(ADMIN))
    assert resp.status_code == 201, resp.text
    return resp.json()


# -- 401 --------------------------------------------------------------------------------------


async def test_no_key_is_401_with_the_error_body_and_www_authenticate(settings, store):
    async with client(secured(settings), store) as http:
        for method, path in [("GET", "/v1/models"), ("POST", "/v1/silences"), ("GET", "/v1/keys"),
                             ("GET", "/v1/alerts/x"), ("DELETE", "/v1/receivers/x")]:
            resp = await http.request(method, path, json=SILENCE if method == "POST" else None)
            assert resp.status_code == 401, (method, path)
            assert resp.headers["www-authenticate"] == "Bearer"
            body = resp.json()
            assert body["code"] == "unauthenticated" and "API key" in body["message"]
            assert set(body) == {"code", "message", "field"}


@pytest.mark.parametrize("headers", [
    bearer("fwk_0123456789abcdef_not-the-secret"),         # the form of a key, unknown id
    {"X-API-Key": "nope"},                                   # not even the form
    bearer(ADMIN[:-1]),                                      # the admin key but one character
    {"Authorization": f"Basic {ADMIN}"},                     # not a bearer credential
])
async def test_unknown_keys_are_401(settings, store, headers):
    async with client(secured(settings), store) as http:
        resp = await http.get("/v1/models", headers=headers)
        assert resp.status_code == 401 and resp.json()["code"] == "unauthenticated"
        assert resp.headers["www-authenticate"] == "Bearer"


async def test_a_known_key_id_with_a_wrong_secret_is_401(settings, store):
    async with client(secured(settings), store) as http:
        key = await new_key(http, "admin")
        forged = f"fwk_{key['id']}_" + "A" * 43
        assert (await http.get("/v1/models", headers=bearer(forged))).status_code == 401
        assert (await http.get("/v1/models", headers=bearer(key["token"]))).status_code == 200


async def test_a_revoked_key_is_401_and_stays_listed_as_revoked(settings, store):
    async with client(secured(settings), store) as http:
        key = await new_key(http, "write")
        assert (await http.get("/v1/models", headers=bearer(key["token"]))).status_code == 200
        revoked = await http.delete(f"/v1/keys/{key['id']}", headers=bearer(ADMIN))
        assert revoked.status_code == 200 and revoked.json()["revoked"] is True
        resp = await http.get("/v1/models", headers=bearer(key["token"]))
        assert resp.status_code == 401 and resp.json()["code"] == "unauthenticated"
        [listed] = (await http.get("/v1/keys", headers=bearer(ADMIN))).json()
        assert listed["id"] == key["id"] and listed["revoked"] is True and listed["revoked_at"] is not None
        again = await http.delete(f"/v1/keys/{key['id']}", headers=bearer(ADMIN))
        assert again.json()["revoked_at"] == revoked.json()["revoked_at"]  # revoking twice changes nothing
        missing = await http.delete("/v1/keys/0000", headers=bearer(ADMIN))
        assert missing.status_code == 404 and missing.json()["field"] == "key_id"


# -- 403 and scopes ---------------------------------------------------------------------------


async def test_a_read_key_reads_but_cannot_write(settings, store):
    async with client(secured(settings), store) as http:
        read = await new_key(http, "read")
        assert (await http.get("/v1/silences", headers=bearer(read["token"]))).status_code == 200
        assert (await http.get("/v1/models", headers={"X-API-Key": read["token"]})).status_code == 200
        for method, path in [("POST", "/v1/silences"), ("DELETE", "/v1/silences/x"),
                             ("PUT", "/v1/models/m"), ("POST", "/v1/ingest")]:
            resp = await http.request(method, path, json=SILENCE, headers=bearer(read["token"]))
            assert resp.status_code == 403, (method, path)
            body = resp.json()
            assert body["code"] == "forbidden" and "'write'" in body["message"]
            assert "www-authenticate" not in resp.headers


async def test_a_write_key_writes_but_cannot_manage_keys(settings, store):
    async with client(secured(settings), store) as http:
        write = await new_key(http, "write")
        created = await http.post("/v1/silences", json=SILENCE, headers={"X-API-Key": write["token"]})
        assert created.status_code == 201
        for method in ("GET", "POST"):
            resp = await http.request(method, "/v1/keys", json={"name": "x", "scope": "read"},
                                      headers=bearer(write["token"]))
            assert resp.status_code == 403 and resp.json()["code"] == "forbidden"
            assert "'admin'" in resp.json()["message"]
        resp = await http.delete(f"/v1/keys/{write['id']}", headers=bearer(write["token"]))
        assert resp.status_code == 403


async def test_admin_implies_write_implies_read(settings, store):
    async with client(secured(settings), store) as http:
        admin = await new_key(http, "admin")
        assert (await http.get("/v1/silences", headers=bearer(admin["token"]))).status_code == 200
        resp = await http.post("/v1/silences", json=SILENCE, headers=bearer(admin["token"]))
        assert resp.status_code == 201
        resp = await http.post("/v1/keys", json={"name": "made by admin", "scope": "read"},
                               headers=bearer(admin["token"]))
        assert resp.status_code == 201 and resp.json()["created_by"] == admin["id"]
    assert Scope.admin.grants(Scope.write) and Scope.write.grants(Scope.read)
    assert not Scope.read.grants(Scope.write) and not Scope.write.grants(Scope.admin)


async def test_auth_off_needs_no_key(settings, store):
    assert settings.api_auth is False  # the default
    async with client(settings, store) as http:
        assert (await http.get("/v1/models")).status_code == 200
        assert (await http.post("/v1/silences", json=SILENCE)).status_code == 201
        created = await http.post("/v1/keys", json={"name": "ci"})
        assert created.status_code == 201 and created.json()["scope"] == "read"
        assert created.json()["created_by"] is None


# -- the bootstrap key, tokens shown once, hashed storage -------------------------------------


async def test_bootstrap_admin_creates_a_key_whose_token_is_shown_once(settings, store):
    async with client(secured(settings), store) as http:
        resp = await http.post("/v1/keys", json={"name": "fraud-model-server", "scope": "write"},
                               headers=bearer(ADMIN))
        assert resp.status_code == 201
        created = resp.json()
        token = created["token"]
        assert key_id_of(token) == created["id"] and created["created_by"] == "bootstrap"
        assert (created["scope"], created["revoked"], created["last_used_at"]) == ("write", False, None)
        assert len(token) >= 4 + 16 + 1 + 43  # prefix, id, separator, 32 random bytes in base64url

        # The token works, with either header.
        assert (await http.get("/v1/models", headers=bearer(token))).status_code == 200
        assert (await http.get("/v1/models", headers={"X-API-Key": token})).status_code == 200

        # It is never returned again: not by the list, nor by revocation.
        listed = await http.get("/v1/keys", headers=bearer(ADMIN))
        assert listed.status_code == 200
        [view] = listed.json()
        assert "token" not in view and "token_sha256" not in view
        assert token not in listed.text and token_sha256(token) not in listed.text
        assert view["last_used_at"] is not None  # used just now
        revoked = await http.delete(f"/v1/keys/{created['id']}", headers=bearer(ADMIN))
        assert token not in revoked.text and token_sha256(token) not in revoked.text


async def test_keys_are_stored_hashed(settings, store):
    async with client(secured(settings), store) as http:
        tokens = [(await new_key(http, scope))["token"] for scope in ("read", "write", "admin")]
        await http.get("/v1/models", headers=bearer(tokens[0]))
    dump = b""
    async for key in store.r.scan_iter(match="*"):
        kind = (await store.r.type(key)).decode()
        if kind == "hash":
            for f, v in (await store.r.hgetall(key)).items():
                dump += key + f + v
        elif kind == "string":
            dump += key + (await store.r.get(key))
    for token in tokens:
        secret = token.split("_", 2)[2]  # fwk_<id>_<secret>: the secret may hold "_"
        assert token.encode() not in dump and secret.encode() not in dump
        assert hashlib.sha256(token.encode()).hexdigest().encode() in dump
    stored = [json.loads(v) for v in (await store.r.hgetall(KEYS)).values()]
    assert {s["token_sha256"] for s in stored} == {token_sha256(t) for t in tokens}
    assert ADMIN.encode() not in dump  # the bootstrap key is configuration, never stored


async def test_tokens_are_compared_in_constant_time(store, monkeypatch):
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    keys = ApiKeyStore(store.r)
    key, token = await keys.create("k", Scope.read, 1_000.0)
    assert (await keys.verify(token, 1_001.0)).key_id == key.id
    assert calls == [(token_sha256(token).encode(), key.token_sha256.encode())]
    calls.clear()
    forged = token[:-1] + ("A" if token[-1] != "A" else "B")
    assert await keys.verify(forged, 1_002.0) is None
    assert calls == [(token_sha256(forged).encode(), key.token_sha256.encode())]
    await keys.revoke(key.id, 1_003.0)
    assert await keys.verify(token, 1_004.0) is None


async def test_the_bootstrap_key_is_compared_in_constant_time(settings, store, monkeypatch):
    calls = []
    real = hmac.compare_digest
    monkeypatch.setattr(hmac, "compare_digest", lambda a, b: calls.append((a, b)) or real(a, b))
    async with client(secured(settings), store) as http:
        assert (await http.get("/v1/keys", headers=bearer(ADMIN))).status_code == 200
        assert calls == [(hashlib.sha256(ADMIN.encode()).digest(), hashlib.sha256(ADMIN.encode()).digest())]


# -- open endpoints and the schema --------------------------------------------------------------


async def test_health_metrics_and_the_schema_stay_open(settings, store):
    async with client(secured(settings), store) as http:
        health = await http.get("/healthz")
        assert health.status_code == 200 and health.json() == {"status": "ok", "redis": True}
        metrics = await http.get("/metrics")
        assert metrics.status_code == 200 and "# TYPE" in metrics.text
        assert (await http.get("/openapi.json")).status_code == 200


async def test_the_schema_declares_the_security_schemes_and_each_operations_scope(settings, store):
    async with client(secured(settings), store) as http:
        spec = (await http.get("/openapi.json")).json()
    schemes = spec["components"]["securitySchemes"]
    assert schemes["bearer"] == {**schemes["bearer"], "type": "http", "scheme": "bearer"}
    assert schemes["apiKey"] == {**schemes["apiKey"], "type": "apiKey", "in": "header", "name": "X-API-Key"}
    expected = {("get", "/v1/models"): "read", ("post", "/v1/models"): "write",
                ("put", "/v1/models/{model_id}/detector-config"): "write",
                ("delete", "/v1/silences/{silence_id}"): "write", ("post", "/v1/ingest"): "write",
                ("get", "/v1/notifications"): "read", ("get", "/v1/keys"): "admin",
                ("post", "/v1/keys"): "admin", ("delete", "/v1/keys/{key_id}"): "admin"}
    for (method, path), scope in expected.items():
        op = spec["paths"][path][method]
        assert op["security"] == [{"bearer": [scope]}, {"apiKey": [scope]}], (method, path)
        assert op["x-required-scope"] == scope
        assert {"401", "403"} <= set(op["responses"])
    v1 = [op for path, item in spec["paths"].items() if path.startswith("/v1/") for op in item.values()]
    assert all(op.get("security") for op in v1)
    assert "security" not in spec["paths"]["/healthz"]["get"]
    assert "security" not in spec["paths"]["/metrics"]["get"]


# -- request size limits ----------------------------------------------------------------------


def oversized_silence(size: int) -> bytes:
    return json.dumps({**SILENCE, "comment": "x" * size}).encode()


async def test_a_body_over_the_limit_is_413_from_its_content_length(settings, store):
    async with client(secured(settings), store) as http:
        body = oversized_silence(LIMIT)
        resp = await http.post("/v1/silences", content=body, headers={
            **bearer(ADMIN), "Content-Type": "application/json"})
        assert resp.status_code == 413
        assert resp.json() == {"code": "body_too_large", "message": f"request body larger than {LIMIT} bytes",
                               "field": None}
        # Refused from the header alone: not one byte of the body is read.
        consumed = []

        async def stream():
            consumed.append(len(body))
            yield body

        resp = await http.post("/v1/silences", content=stream(), headers={
            **bearer(ADMIN), "Content-Type": "application/json", "Content-Length": str(len(body))})
        assert resp.status_code == 413 and consumed == []
        # Refused before authentication: no key needed to learn it is too large.
        assert (await http.post("/v1/silences", content=body)).status_code == 413
        # Just under the limit it is read (and answered on its merits: 422, comment too long).
        small = oversized_silence(LIMIT - 200)
        assert len(small) <= LIMIT
        resp = await http.post("/v1/silences", content=small, headers={
            **bearer(ADMIN), "Content-Type": "application/json"})
        assert resp.status_code == 422 and resp.json()["field"] == "comment"


async def test_a_streamed_body_over_the_limit_is_413_before_it_is_all_read(settings, store):
    sent = []

    async def chunks():
        yield b'{"matchers": [{"name": "model", "value": "fraud"}], "comment": "'
        for _ in range(100):
            sent.append(1_024)
            yield b"x" * 1_024
        yield b'", "ends_at": "2999-01-01T00:00:00Z", "created_by": "ana"}'

    async with client(secured(settings), store) as http:
        resp = await http.post("/v1/silences", content=chunks(), headers={
            **bearer(ADMIN), "Content-Type": "application/json"})
        assert "content-length" not in resp.request.headers  # chunked transfer encoding
        assert resp.status_code == 413 and resp.json()["code"] == "body_too_large"
        assert sum(sent) <= LIMIT + 2 * 1_024  # stopped reading at the limit, not at the end


async def test_the_reference_upload_has_its_own_larger_limit(settings, store):
    rows = [{"distance": float(i), "carrier": "UA"} for i in range(600)]
    body = json.dumps({"rows": rows}).encode()
    assert LIMIT < len(body) < REFERENCE_LIMIT
    await store.put_model_config("m", ModelConfig())
    async with client(secured(settings), store) as http:
        headers = {**bearer(ADMIN), "Content-Type": "application/json"}
        resp = await http.post("/v1/models/m/reference", content=body, headers=headers)
        assert resp.status_code == 200 and resp.json()["count"] == 600
        # The same size is too large elsewhere, and the reference limit still holds.
        elsewhere = await http.put("/v1/models/m/detector-config", content=body, headers=headers)
        assert elsewhere.status_code == 413
        huge = json.dumps({"rows": rows * 40}).encode()
        assert len(huge) > REFERENCE_LIMIT
        resp = await http.post("/v1/models/m/reference", content=huge, headers=headers)
        assert resp.status_code == 413 and resp.json()["code"] == "body_too_large"


async def test_the_default_limits_keep_the_reference_and_ingest_maxima_working(settings):
    # 100,000 reference rows of a few numeric features, 10,000 ingest records of ten.
    row = {f"f{i}": 12345.678 for i in range(8)}
    reference = len(json.dumps({"rows": [row] * 100_000}))
    assert reference < settings.api_max_reference_body_bytes
    record = {"model_id": "fraud-v3", "model_version": "3", "prediction_id": "req-0123456789",
              "event_time": 1_700_000_000.0, "features": {f"f{i}": 12345.678 for i in range(10)},
              "score": 0.07}
    assert len(json.dumps({"records": [record] * 10_000})) < settings.api_max_body_bytes
