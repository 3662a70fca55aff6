"""Stored configuration never poisons a worker.

First wall: every number the API stores is finite (NaN, +/-inf and literals such as
``1e400`` that JSON reads as inf are answered 422 naming the field), and every stored
configuration model reads back as it was written (a property test over valid instances
generated from each model's own JSON schema, non-finite numbers mixed in: whatever
validates must round-trip). Second wall: a configuration that does not parse (written by
hand, or by an older version) is logged, counted on ``fleetwatch_config_errors_total``,
and its model falls back to its last good configuration or the defaults, while every
role keeps running and ``GET /v1/models`` keeps answering.
"""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import jsonschema_rs
import pytest
from aiokafka import AIOKafkaProducer
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY
from pydantic import BaseModel, ValidationError
from schemathesis.generation.jsonschema.builder import build

from detectors.config import DetectorConfig
from detectors.policy.silence import Silence
from sdk.record import PredictionRecord
from sdk.wire import encode_batch
from service.api.app import create_app
from service.api.auth import StoredKey
from service.detection.detector import Detector
from service.paging.receiver_config import Receiver
from service.profiles.keys import config_key
from service.profiles.reference import build_reference
from service.registry import ModelConfig
from service.stored import ConfigCache, Unreadable, decode_stored, encode_stored
from tests.conftest import wait_for
from tests.roles import running, window_counts

T0 = 1_700_000_100
JSON = {"content-type": "application/json"}

# (method, path, raw JSON body, the field the 422 must name)
NON_FINITE = [
    ("PUT", "/v1/models/p", '{"tier":1,"performance":{"task":"binary","log_loss_floor":1e400}}',
     "performance.log_loss_floor"),
    ("PUT", "/v1/models/p", '{"performance":{"mae_floor":Infinity}}', "performance.mae_floor"),
    ("PUT", "/v1/models/p", '{"performance":{"mae_relative_floor":NaN}}', "performance.mae_relative_floor"),
    ("POST", "/v1/models", '{"model_id":"q","floors":{"psi":-1e400}}', "floors.psi"),
    ("POST", "/v1/models", '{"model_id":"q","floors":{"psi":NaN}}', "floors.psi"),
    ("PUT", "/v1/models/m/detector-config", '{"floors":{"psi":1e400}}', "floors.psi"),
    ("PUT", "/v1/models/m/detector-config", '{"alpha":NaN}', "alpha"),
    ("PUT", "/v1/models/m/detector-config", '{"fdr_weights":{"psi":Infinity}}', "fdr_weights.psi"),
    ("PUT", "/v1/models/m/detector-config", '{"features":{"x":{"floors":{"ks":1e999}}}}',
     "features.x.floors.ks"),
    ("PUT", "/v1/models/m/detector-config/features/x", '{"floors":{"ks":Infinity}}', "floors.ks"),
    ("POST", "/v1/receivers", '{"name":"r","kind":"slack","url":"https://hooks.slack.com/x",'
                              '"group_wait_seconds":NaN}', "group_wait_seconds"),
]


@pytest.mark.parametrize(("method", "path", "body", "field"), NON_FINITE)
async def test_non_finite_numbers_are_refused_naming_the_field(settings, store, method, path, body, field):
    await store.put_model_config("m", ModelConfig())
    app = create_app(settings, store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        resp = await http.request(method, path, content=body, headers=JSON)
        assert resp.status_code == 422, resp.text
        assert resp.json()["field"] == field, resp.json()
        assert (await http.get("/v1/models")).status_code == 200
    assert await store.r.get(config_key("p")) is None
    assert await store.detector_config("m") is None


# -- every stored model round-trips -------------------------------------------------------------

STORED: list[type[BaseModel]] = [ModelConfig, DetectorConfig, Silence, Receiver, StoredKey]
POISON = [math.inf, -math.inf, math.nan, 1e308 * 10]
# Fields tied together by cross-field rules the JSON schema cannot say, fixed to one valid
# combination so that enough generated instances are valid.
SEEDS: dict[type[BaseModel], dict[str, Any]] = {
    Receiver: {"kind": "slack", "url": "https://hooks.slack.com/services/T/B/x", "routing_key": None,
               "secret": None}}


FORMATS = {"date-time": st.datetimes().map(lambda d: d.isoformat() + "Z")}


@st.composite
def maybe_poisoned(draw: st.DrawFn, schema: dict[str, Any]) -> Any:
    """A JSON value of ``schema`` (schemathesis' JSON Schema generator, as the API test uses)
    whose numbers may be replaced by non-finite ones (what ``json.loads`` makes of ``NaN``,
    ``Infinity`` or ``1e400`` in a request body)."""
    value = draw(build(schema, draft=jsonschema_rs.Draft202012, formats=FORMATS))

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, float | int) and not isinstance(v, bool) and draw(st.booleans()):
            return draw(st.sampled_from(POISON))
        return v

    return walk(value)


@pytest.mark.parametrize("cls", STORED, ids=lambda c: c.__name__)
def test_every_stored_model_reads_back_what_was_written(cls):
    accepted = []

    @given(data=maybe_poisoned(cls.model_json_schema()).map(lambda d: {**d, **SEEDS.get(cls, {})}))
    @hypothesis_settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck),
                         derandomize=True)
    def round_trip(data):
        try:
            written = cls.model_validate(data)
        except ValidationError:
            return  # refused at the edge: nothing is stored
        accepted.append(written)
        raw = encode_stored(written)
        assert decode_stored(cls, raw) == written

    round_trip()
    assert len(accepted) >= 5, "too few valid instances generated to mean anything"


# -- second wall: workers and the listing survive a stored config that does not parse -----------

POISONED_CONFIG = '{"tier": 1, "performance": {"task": "binary", "log_loss_floor": null}}'
POISONED_DETECTOR = '{"floors": {"psi": null}}'


def config_errors(role: str, kind: str) -> float:
    return REGISTRY.get_sample_value("fleetwatch_config_errors_total", {"role": role, "kind": kind}) or 0.0


async def poison(store, model_id: str) -> None:
    await store.r.set(config_key(model_id), POISONED_CONFIG)
    await store.r.set(f"fw:{{{model_id}}}:detcfg", POISONED_DETECTOR)
    await store.r.sadd("{fw}:models", model_id)


async def test_roles_and_the_listing_survive_a_poisoned_config(settings, store):
    await poison(store, "p")
    await store.put_model_config("h", ModelConfig(window_seconds=60))
    before = {role: config_errors(role, "model") for role in ("aggregator", "joiner", "api")}
    app = create_app(settings, store)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
    async with running(settings, store, "aggregator", "joiner"):
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
        await producer.start()
        try:
            for m in ("p", "h"):
                records = [PredictionRecord(m, "1", f"{m}{i}", T0 + i, {"x": float(i)}, score=0.5)
                           for i in range(100)]
                await producer.send_and_wait(settings.predictions_topic, encode_batch(records),
                                             key=m.encode())
        finally:
            await producer.stop()

        async def stored() -> bool:
            return (sum((await window_counts(store, "p")).values()) == 100
                    and sum((await window_counts(store, "h")).values()) == 100)

        await wait_for(stored, timeout=120)
        await wait_for(lambda: _async(config_errors("joiner", "model") > before["joiner"]))
    # p fell back to the defaults (300 s windows); h kept its own (60 s)
    assert set(await window_counts(store, "p")) == {T0 // 300 * 300}
    assert len(await window_counts(store, "h")) == 2
    assert config_errors("aggregator", "model") > before["aggregator"]

    resp = await http.get("/v1/models")
    assert resp.status_code == 200, resp.text
    listed = {m["model_id"]: m for m in resp.json()}
    assert listed["p"]["config"] is None and "log_loss_floor" in listed["p"]["config_error"]
    assert listed["h"]["config"]["window_seconds"] == 60 and listed["h"]["config_error"] is None
    assert config_errors("api", "model") > before["api"]
    # the detector configuration of p is shown as unreadable, and replacing it repairs it
    view = (await http.get("/v1/models/p/detector-config")).json()
    assert view["config"] is None and "floors.psi" in view["config_error"]
    assert view["effective"]["floors"]["psi"] == settings.psi_floor
    assert (await http.put("/v1/models/p", json={})).status_code == 200
    assert (await http.get("/v1/models")).json()[0]["config_error"] is None
    await http.aclose()


async def _async(value: bool) -> bool:
    return value


async def test_detector_evaluates_a_model_with_a_poisoned_detector_config(settings, store):
    await poison(store, "p")
    await store.put_reference("p", build_reference("p", [{"x": float(i % 50)} for i in range(500)]))
    from service.profiles.keys import profile_key, window_index_key, window_member
    from sketches.profile import WindowProfile

    w = WindowProfile("p", T0 // 300 * 300, 300)
    w.add_records([PredictionRecord("p", "1", str(i), T0 + 1.0, {"x": float(i % 50)}) for i in range(500)])
    member = window_member(300, w.window_start, "1")
    await store.r.set(profile_key("p", member), w.to_bytes())
    await store.r.zadd(window_index_key("p"), {member: w.window_start})
    before = config_errors("detector", "detector")
    detector = Detector(settings, store)
    await detector.evaluate("p", member)
    results = await store.results("p", member)
    assert results, "the window was not evaluated"
    assert {r["floor"] for r in results if r["check"] == "psi"} == {settings.psi_floor}  # the defaults
    assert config_errors("detector", "detector") > before
    assert json.loads(await store.detector_config("p")) == json.loads(POISONED_DETECTOR)  # left as it is


async def test_a_corrupt_reference_profile_neither_breaks_the_listing_nor_the_detector(settings, store):
    from service.profiles.keys import profile_key, reference_key, window_index_key, window_member
    from sketches.profile import WindowProfile

    await store.put_model_config("c", ModelConfig())
    await store.put_reference("c", build_reference("c", [{"x": float(i % 50)} for i in range(500)]))
    await store.r.set(reference_key("c"), b"\x00 not a profile")
    before_api, before_detector = config_errors("api", "reference"), config_errors("detector", "reference")
    app = create_app(settings, store)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        resp = await http.get("/v1/models")
    assert resp.status_code == 200, resp.text
    assert [m["has_reference"] for m in resp.json() if m["model_id"] == "c"] == [False]
    assert config_errors("api", "reference") > before_api
    w = WindowProfile("c", T0 // 300 * 300, 300)
    w.add_records([PredictionRecord("c", "1", str(i), T0 + 1.0, {"x": float(i % 50)}) for i in range(500)])
    member = window_member(300, w.window_start, "1")
    await store.r.set(profile_key("c", member), w.to_bytes())
    await store.r.zadd(window_index_key("c"), {member: w.window_start})
    await Detector(settings, store).evaluate("c", member)  # no exception: the reference is ignored
    assert config_errors("detector", "reference") > before_detector


async def test_a_worker_keeps_the_last_good_config_of_a_model_whose_config_turns_unreadable():
    stored: dict[str, ModelConfig | Unreadable | None] = {"a": ModelConfig(window_seconds=60), "b": None}

    async def load(ids):
        return {m: stored[m] for m in ids}

    cache = ConfigCache(load, lambda _m: ModelConfig(window_seconds=300), ttl=0)
    assert {m: c.window_seconds for m, c in (await cache.get(["a", "b"])).items()} == {"a": 60, "b": 300}
    stored["a"] = Unreadable("window_seconds: Input should be a valid integer")
    stored["c"] = Unreadable("tier: Input should be a valid integer")
    got = await cache.get(["a", "b", "c"])
    assert (got["a"].window_seconds, got["c"].window_seconds) == (60, 300)  # last good; defaults
    stored["a"] = ModelConfig(window_seconds=120)
    assert (await cache.one("a")).window_seconds == 120  # repaired
