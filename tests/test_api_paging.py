"""Paging of the list endpoints: limit / offset, their bounds, and the pages they give."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from service.api.app import create_app
from service.api.params import MAX_OFFSET
from service.registry import ModelConfig
from tests.test_detection_worker import MODEL, T0, put_window, rows

LISTS = ["/v1/models", "/v1/alerts", "/v1/incidents", "/v1/silences", "/v1/receivers", "/v1/notifications",
         "/v1/keys", f"/v1/models/{MODEL}/profiles", f"/v1/models/{MODEL}/performance"]


def client(settings, store) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(settings, store)),
                             base_url="http://t")


@pytest.mark.parametrize("path", LISTS)
async def test_every_list_bounds_limit_and_offset_with_422_naming_the_field(settings, store, path):
    async with client(settings, store) as http:
        for params, field in [({"limit": 0}, "limit"), ({"limit": 100_000}, "limit"),
                              ({"offset": -1}, "offset"), ({"offset": MAX_OFFSET * 10}, "offset"),
                              ({"limit": "ten"}, "limit")]:
            resp = await http.get(path, params=params)
            assert resp.status_code == 422, (path, params)
            assert resp.json()["code"] == "invalid_request" and resp.json()["field"] == field


async def test_an_offset_past_redis_integers_is_422_not_500(settings, store):
    async with client(settings, store) as http:
        for path in ("/v1/alerts", "/v1/incidents"):
            resp = await http.get(path, params={"offset": 10**19})
            assert resp.status_code == 422 and resp.json()["field"] == "offset"


async def test_models_and_silences_page_in_order(settings, store):
    for m in ("a", "b", "c", "d", "e"):
        await store.put_model_config(m, ModelConfig())
    async with client(settings, store) as http:
        pages = [[m["model_id"] for m in
                  (await http.get("/v1/models", params={"limit": 2, "offset": o})).json()]
                 for o in (0, 2, 4, 6)]
        assert pages == [["a", "b"], ["c", "d"], ["e"], []]
        body = {"matchers": [{"name": "model", "value": "a"}], "ends_at": "2999-01-01T00:00:00Z",
                "created_by": "ana", "comment": "c"}
        ids = [(await http.post("/v1/silences", json=body)).json()["id"] for _ in range(3)]
        first = (await http.get("/v1/silences", params={"limit": 2})).json()
        rest = (await http.get("/v1/silences", params={"limit": 2, "offset": 2})).json()
        assert [s["id"] for s in first + rest] == ids[::-1]  # newest first


async def test_keys_page_newest_first(settings, store):
    async with client(settings, store) as http:
        ids = [(await http.post("/v1/keys", json={"name": f"k{i}"})).json()["id"] for i in range(3)]
        listed = [[k["id"] for k in (await http.get("/v1/keys", params={"limit": 2, "offset": o})).json()]
                  for o in (0, 2)]
        assert sorted(listed[0] + listed[1]) == sorted(ids) and len(listed[0]) == 2


async def test_profiles_page_by_offset(settings, store):
    rng = np.random.default_rng(3)
    for i in range(5):
        await put_window(store, T0 + 300 * i, rows(rng, 20))
    async with client(settings, store) as http:
        def starts(resp):
            assert resp.status_code == 200
            return [w["window_start"] for w in resp.json()["windows"]]

        path = f"/v1/models/{MODEL}/profiles"
        every = starts(await http.get(path, params={"granularity": "window"}))
        assert every == [T0 + 300 * i for i in range(5)]
        pages = [starts(await http.get(path, params={"granularity": "window", "limit": 2, "offset": o}))
                 for o in (0, 2, 4)]
        assert pages == [every[:2], every[2:4], every[4:]]
