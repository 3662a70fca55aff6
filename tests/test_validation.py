"""Validation is the same everywhere: one model id rule (bodies, URL paths, ingest, the
Kafka envelopes, the SDK), slice keys checked like feature names, unknown fields refused
in every request body, and no silent coercion of strings to numbers or booleans."""

from __future__ import annotations

from urllib.parse import quote

import httpx
import msgpack
import pytest
from aiokafka import AIOKafkaProducer

from sdk import Client
from sdk.errors import BAD_ENVELOPE, WireError
from sdk.labels import decode_labels
from sdk.record import INVALID_ID, RecordError, check_model_id, validate_record
from sdk.stats import ClientStats
from sdk.wire import decode_batch
from service.api.app import create_app
from service.registry import ModelConfig
from tests.conftest import wait_for
from tests.roles import running, window_counts
from tests.test_profiles_bad_input import dead_lettered
from tests.test_sdk_logging import UNREACHABLE, batcher, decoded, rows_of

BAD_IDS = ["a" * 257, "..", ".", "../../keys", "a/b", "a\\b", "a\x00b", "line\nbreak", "\u2028"]
RECORD = {"model_version": "1", "prediction_id": "p1", "event_time": 1.7e9, "features": {"x": 1.0}}


@pytest.fixture
async def http(settings, store):
    await store.put_model_config("m", ModelConfig())
    app = create_app(settings, store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        yield client


@pytest.mark.parametrize("model_id", BAD_IDS, ids=repr)
async def test_one_model_id_rule_in_every_path(http, store, model_id):
    with pytest.raises(RecordError):
        check_model_id(model_id)
    resp = await http.post("/v1/models", json={"model_id": model_id})
    assert (resp.status_code, resp.json()["field"]) == (422, "model_id"), resp.text
    for method, suffix in (("PUT", ""), ("PUT", "/detector-config"), ("POST", "/reference")):
        body = {"rows": [{"x": 1.0}]} if suffix == "/reference" else {}
        encoded = quote(model_id, safe="").replace(".", "%2E")  # else the client drops dot segments
        resp = await http.request(method, f"/v1/models/{encoded}{suffix}", json=body)
        assert 400 <= resp.status_code < 500, (method, suffix, resp.text)  # never stored
    resp = await http.post("/v1/ingest", json={"records": [{**RECORD, "model_id": model_id}]})
    assert (resp.status_code, resp.json()["field"]) == (422, "records[0].model_id"), resp.text
    assert await store.models() == ["m"]
    # the Kafka envelopes: the whole message is dead-lettered as bad_envelope
    with pytest.raises(WireError) as err:
        decode_batch(msgpack.packb({"v": 1, "m": model_id, "r": []}))
    assert err.value.reason == BAD_ENVELOPE and "model_id" in str(err.value)
    with pytest.raises(WireError):
        decode_labels(msgpack.packb({"v": 1, "k": "labels", "m": model_id,
                                     "c": {"prediction_id": [], "label": [], "event_time": []}}))


def test_model_ids_that_urls_can_reach_are_accepted():
    for model_id in ("fraud-v3", "fraud v2", "a.b", "...", "ünïcode", "a?b#c%d", "a" * 256):
        assert check_model_id(model_id) == model_id
    with pytest.raises(RecordError) as err:
        check_model_id("..")
    assert err.value.reason == INVALID_ID


BAD_SLICE_KEYS = [1, b"k", None, "", "k" * 100_000]


@pytest.mark.parametrize("key", BAD_SLICE_KEYS, ids=lambda k: repr(k)[:20])
def test_slice_keys_are_validated_like_feature_names(key):
    with pytest.raises(RecordError) as err:
        validate_record({**RECORD, "model_id": "m", "slices": {key: "DE"}})
    assert err.value.field == "slices"
    # in the column wire format, only the records holding a value under the key are refused
    columns = {"model_version": ["1", "1"], "prediction_id": ["a", "b"], "event_time": [1.7e9, 1.7e9],
               "features": {"x": [1.0, 2.0]}, "slices": {key: ["DE", None], "ok": ["FR", "FR"]}}
    batch = decode_batch(msgpack.packb({"v": 2, "m": "m", "c": columns}, use_bin_type=True))
    assert [i for i, _e in batch.errors] == [0]
    assert batch.columns.prediction_id == ["b"] and set(batch.columns.slices) == {"ok"}


# (method, path, a valid body) of every operation that takes a body
BODIES = [
    ("POST", "/v1/models", {"model_id": "n"}),
    ("PUT", "/v1/models/m", {}),
    ("POST", "/v1/models/m/reference", {"rows": [{"x": 1.0}]}),
    ("POST", "/v1/alerts/a1/ack", {"by": "ana"}),
    ("POST", "/v1/alerts/a1/resolve", {"by": "ana"}),
    ("PUT", "/v1/models/m/detector-config", {}),
    ("PUT", "/v1/models/m/detector-config/features/x", {}),
    ("POST", "/v1/ingest", {"records": [{**RECORD, "model_id": "m"}]}),
    ("POST", "/v1/silences", {"matchers": [{"name": "model", "value": "m"}],
                              "ends_at": "2999-01-01T00:00:00Z", "created_by": "ana", "comment": "c"}),
    ("POST", "/v1/receivers", {"name": "r", "kind": "slack", "url": "https://127.0.0.1/x"}),
    ("POST", "/v1/keys", {"name": "k"}),
]


@pytest.mark.parametrize(("method", "path", "body"), BODIES, ids=lambda v: v if isinstance(v, str) else "")
async def test_unknown_fields_are_refused_in_every_body(http, method, path, body):
    resp = await http.request(method, path, json={**body, "window": 86_400})
    assert (resp.status_code, resp.json()["field"]) == (422, "window"), resp.text


@pytest.mark.parametrize(("method", "path", "body", "field"), [
    ("PUT", "/v1/models/m", {"performance": {"task": "binary", "surprise": 1}}, "performance.surprise"),
    ("PUT", "/v1/models/m", {"persistence": {"k": 1, "n": 2}}, "persistence.n"),
    ("PUT", "/v1/models/m/detector-config", {"baseline": {"kind": "auto", "weeks": 2}}, "baseline.weeks"),
    ("PUT", "/v1/models/m/detector-config", {"features": {"x": {"floor": {}}}}, "features.x.floor"),
    ("POST", "/v1/silences", {"matchers": [{"name": "model", "value": "m", "regexp": True}],
                              "ends_at": "2999-01-01T00:00:00Z", "created_by": "a", "comment": "c"},
     "matchers.0.regexp"),
])
async def test_unknown_nested_fields_are_refused(http, method, path, body, field):
    resp = await http.request(method, path, json=body)
    assert (resp.status_code, resp.json()["field"]) == (422, field), resp.text


@pytest.mark.parametrize(("method", "path", "body", "field"), [
    ("POST", "/v1/models", {"model_id": "n", "window_seconds": "300"}, "window_seconds"),
    ("PUT", "/v1/models/m", {"tier": 1.0}, "tier"),
    ("PUT", "/v1/models/m", {"window_seconds": 300.5}, "window_seconds"),
    ("PUT", "/v1/models/m/detector-config", {"floors": {"psi": "0.3"}}, "floors.psi"),
    ("PUT", "/v1/models/m/detector-config", {"alpha": "0.01"}, "alpha"),
    ("POST", "/v1/models/m/reference", {"rows": [{"x": 1.0}], "replace": "false"}, "replace"),
    ("POST", "/v1/models/m/reference", {"rows": [{"x": 1.0}], "replace": 0}, "replace"),
    ("POST", "/v1/receivers", {"name": "r", "kind": "slack", "url": "https://127.0.0.1/x",
                               "max_per_minute": "60"}, "max_per_minute"),
])
async def test_numbers_and_booleans_are_not_coerced_from_strings(http, method, path, body, field):
    resp = await http.request(method, path, json=body)
    assert (resp.status_code, resp.json()["field"]) == (422, field), resp.text


def test_the_sdk_drops_only_the_records_breaking_the_id_and_slice_key_rules():
    client = Client(UNREACHABLE)
    client.log_prediction("m", {"x": 1.0}, prediction_id="ok1", slices={"country": "DE"})
    for model_id in ("../../keys", "..", "a" * 257):
        client.log_prediction(model_id, {"x": 1.0})
    for key in (b"k", None, "", "k" * 100_000):
        client.log_prediction("m", {"x": 1.0}, prediction_id=f"bad-{key!r:.10}", slices={key: "DE"})
    client.log_prediction("m", {"x": 2.0}, prediction_id="ok2")
    stats = ClientStats()
    records = decoded(batcher().predictions(rows_of(client), [], stats))
    assert [r.prediction_id for r in records] == ["ok1", "ok2"]
    assert stats.dropped_invalid == 7


async def test_the_aggregator_dead_letters_a_message_whose_model_id_breaks_the_rule(settings, store):
    app = create_app(settings, store)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
    before = dead_lettered((await http.get("/metrics")).text).get("bad_envelope", 0)
    rows = [["1", f"p{i}", 1.7e9 + i, {"x": 1.0}, None, None, None, {}, None] for i in range(5)]
    async with running(settings, store, "aggregator"):
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
        await producer.start()
        try:
            for model_id in ("../../keys", "ok"):
                await producer.send_and_wait(settings.predictions_topic,
                                             msgpack.packb({"v": 1, "m": model_id, "r": rows}),
                                             key=model_id.encode())
        finally:
            await producer.stop()

        async def done() -> bool:
            bad = dead_lettered((await http.get("/metrics")).text).get("bad_envelope", 0)
            return bad - before >= 1 and sum((await window_counts(store, "ok")).values()) == 5

        await wait_for(done, timeout=120)
    await http.aclose()
    assert await store.models() == ["ok"]
