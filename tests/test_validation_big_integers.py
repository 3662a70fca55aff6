"""Integers beyond 64 bits wherever a user can send one (features, score, latency,
event time, class probabilities, predicted label, label). The contract accepts an
integer that fits 64 bits, signed or unsigned (-2**63 to 2**64 - 1: every numpy
integer dtype, exactly what MessagePack carries) and refuses any other with
``out_of_range`` naming the field, before anything hands it to numpy or float. The SDK
drops only the offending record and its counters add up; HTTP ingest and reference
upload (JSON, DataFrame, CSV) answer 422 naming the field; the aggregator profiles the
64-bit extremes and dead-letters what a non-SDK producer can send in their place."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import uuid

import httpx
import msgpack
import numpy as np
import pandas as pd
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sdk import Client, PiiPolicy, upload_reference
from sdk.batching import Batcher, split_messages
from sdk.columns import RecordColumns, validate_columns
from sdk.labels import LabelColumns, check_label, decode_labels, encode_labels
from sdk.record import INT_MAX, INT_MIN, OUT_OF_RANGE, RecordError, validate_record
from sdk.sampling import Sampler
from sdk.stats import ClientStats, StreamStats
from sdk.wire import decode_batch, encode_columns
from service.api.app import create_app
from service.cli import app as cli_app
from service.registry import ModelConfig
from tests.conftest import wait_for
from tests.roles import running, window_counts
from tests.test_sdk_client import consume

T0 = 1_700_000_100  # a 300 s window boundary
UNREACHABLE = "127.0.0.1:1"
BEYOND = [2**64, 10**400, INT_MIN - 1, -(10**400), 2**70]  # each refused
WITHIN = [INT_MAX, 2**63, INT_MIN, 0, 2**53 + 1]  # INT_MAX is 2**64 - 1
BIGNUM = msgpack.ExtType(1, (2**70).to_bytes(9, "big"))  # how some MessagePack libraries send a bignum


def record(**over) -> dict:
    return {"model_id": "m", "model_version": "1", "prediction_id": "p", "event_time": T0 + 1.0,
            "features": {"amount": 1.5, "country": "DE"}, "score": 0.5} | over


# Where an integer can sit in a record: (the record's override, the field named in the error).
PLACES = [
    (lambda v: {"features": {"amount": v}}, "features.amount"),
    (lambda v: {"score": v}, "score"),
    (lambda v: {"latency_ms": v}, "latency_ms"),
    (lambda v: {"event_time": v}, "event_time"),
    (lambda v: {"class_probabilities": {"a": v}}, "class_probabilities.a"),
    (lambda v: {"predicted_label": v}, "predicted_label"),
]


# -- the contract (pure) --------------------------------------------------------------
@pytest.mark.parametrize("value", BEYOND, ids=lambda v: str(v)[:12])
@pytest.mark.parametrize(("place", "field"), PLACES, ids=[f for _p, f in PLACES])
def test_an_integer_beyond_64_bits_is_refused_in_every_field_naming_it(place, field, value):
    with pytest.raises(RecordError) as exc:
        validate_record(record(**place(value)))
    assert (exc.value.field, exc.value.reason) == (field, OUT_OF_RANGE)
    with pytest.raises(RecordError) as exc:
        check_label(value)
    assert (exc.value.field, exc.value.reason) == ("label", OUT_OF_RANGE)


def test_integers_within_64_bits_are_kept_exactly_where_they_were_before():
    for v in WITHIN:
        r = validate_record(record(features={"amount": v}, predicted_label=v, score=v, latency_ms=v))
        assert (r.features["amount"], r.predicted_label, r.score) == (v, v, float(v))
        assert check_label(v) == v
        assert decode_batch(encode_columns(RecordColumns.from_records("m", [r]))).records == [r]


GOOD = {  # valid values per place, integers among floats (and strings) in one column
    "features.amount": [1, 0.25, 1], "score": [1, 0.25, 0], "latency_ms": [3, 2.5, 1],
    "event_time": [T0, T0 + 0.5, T0], "class_probabilities.a": [1, 0.25, 0], "predicted_label": [1, 0, "x"],
}


def as_row(data: dict) -> tuple:
    """A record dict as log_prediction buffers it."""
    return (data["model_id"], data["features"], data["model_version"], data["prediction_id"],
            data["event_time"], data.get("score"), data.get("class_probabilities"),
            data.get("predicted_label"), data.get("slices"), data.get("latency_ms"))


@pytest.mark.parametrize(("place", "field"), PLACES, ids=[f for _p, f in PLACES])
def test_the_sdk_drops_only_the_record_with_an_integer_beyond_64_bits_and_names_its_field(
        place, field, caplog):
    """The SDK's column checks pass integers of any size on their fast paths (a pass
    over every integer would cost as much as the type check); the encoder refuses
    them, and only their record is left out, its field named by the value check."""
    for pos, bad in enumerate(BEYOND):
        records = [record(prediction_id=f"g{i}", **place(v)) for i, v in enumerate(GOOD[field])]
        records.insert(pos % 4, record(prediction_id="bad", **place(bad)))
        stats = StreamStats()
        caplog.clear()
        with caplog.at_level("WARNING", logger="fleetwatch.sdk"):
            out = batcher().predictions([as_row(r) for r in records], [], stats)
        assert [r.prediction_id for _k, v, _n in out for r in decode_batch(v).records] == ["g0", "g1", "g2"]
        assert stats.dropped_invalid == 1 and len(out) == 1
        assert f"{field}: integer beyond 64 bits" in caplog.text


def test_the_column_check_never_raises_on_an_integer_beyond_float_range():
    wire = {"model_version": ["1"] * 3, "prediction_id": ["a", "b", "c"], "event_time": [T0, 10**400, T0],
            "features": {}, "score": [0.5, 1, 10**400]}
    valid, errors = validate_columns("m", wire)
    assert [(i, e.field, e.reason) for i, e in errors] == [(1, "event_time", OUT_OF_RANGE),
                                                           (2, "score", OUT_OF_RANGE)]
    assert valid.prediction_id == ["a"]


def test_columnar_chunks_lose_only_their_records_with_integers_beyond_64_bits():
    for col in (["a", 2**64, None], [None, 1.5, -(2**63) - 1], [True, 10**400], [2**64] * 3,
                [2**64 - 1, -(2**63), 2**63]):
        n = len(col)
        chunk = RecordColumns("m", ["1"] * n, [f"p{i}" for i in range(n)], [T0] * n, {"x": col})
        stats = StreamStats()
        out = batcher().predictions([], [chunk], stats)
        kept = [r for _k, v, _n in out for r in decode_batch(v).records]
        fits = [i for i, v in enumerate(col) if type(v) is not int or INT_MIN <= v <= INT_MAX]
        assert [r.prediction_id for r in kept] == [f"p{i}" for i in fits]
        assert [r.features.get("x") for r in kept] == [col[i] for i in fits]
        assert stats.dropped_invalid == n - len(fits)


# -- the SDK: only the offending record is dropped ------------------------------------
def test_the_encoder_leaves_out_only_the_records_it_cannot_carry():
    """The second wall: a value that passes validation but that MessagePack refuses
    (here injected past validation: an integer beyond 64 bits, a lone surrogate)
    costs only its own record, found by bisection."""
    n = 5_000
    label = [i for i in range(n)]
    label[17], label[4321] = 2**64, "\ud800"
    split = split_messages(b"m", LabelColumns("m", [f"p{i}" for i in range(n)], label, [T0] * n),
                           encode_labels, 1_000, 1_000_000)
    assert [i for i, _e in split.unencodable] == [17, 4321] and split.oversized == 0
    assert [m[2] for m in split.messages] == [999, 1_000, 1_000, 1_000, 999]  # the rest cut as usual
    kept = [p for _k, v, _n in split.messages for p in decode_labels(v).columns.prediction_id]
    assert kept == [f"p{i}" for i in range(n) if i not in (17, 4321)]
    assert sum(m[2] for m in split.messages) == n - 2


def batcher() -> Batcher:
    return Batcher(1_000, 1_000_000, Sampler(), None)


BAD_ROWS = [  # log_prediction keyword arguments, one out-of-range integer each
    {"score": 10**400}, {"features": {"amount": 2**64}}, {"features": {"amount": INT_MIN - 1}},
    {"predicted_label": 2**64}, {"latency_ms": 10**400}, {"event_time": 10**400},
    {"class_probabilities": {"a": 2**64}}, {"features": {"amount": 1.0, "n": 10**400}},
]


def log_mix(fw: Client, good_per_model: int) -> tuple[set[str], int, set[str], int]:
    """Log good and bad predictions and labels; (good ids, bad count, good label ids, bad labels)."""
    good, bad = set(), 0
    for i in range(good_per_model):
        for model in ("a", "b"):
            pid = f"{model}{i}"
            features = {"amount": float(i), "n": i, "c": "xyz"[i % 3]}
            assert fw.log_prediction(model, features, prediction_id=pid, event_time=T0 + i % 300,
                                     score=i / good_per_model, predicted_label=i % 2)
            good.add(pid)
        if i % 250 == 0:
            kw = dict(BAD_ROWS[(i // 250) % len(BAD_ROWS)])
            fw.log_prediction("a", kw.pop("features", {"amount": 1.0}), prediction_id=f"bad{i}",
                              event_time=kw.pop("event_time", T0), **kw)
            bad += 1
    # columns: a uint64 array (kept whole: 64 bits unsigned) and an object column of Python ints
    counts = np.array([1, 2**64 - 1, 3, 2**63], dtype=np.uint64)
    big = np.array([1, 2**64, 10**400, -(2**63) - 1], dtype=object)
    assert fw.log_predictions("b", {"count": counts, "big": big}, event_times=[T0] * 4,
                              prediction_ids=[f"col{i}" for i in range(4)]) == 4
    good.add("col0")
    bad += 3
    labels, bad_labels = set(), 0
    for i, y in enumerate([1, 2**64, 0, 10**400, 1, INT_MIN - 1, 7, 2**64 - 1, INT_MIN]):
        fw.log_label("a", f"a{i}", y, event_time=T0 + 600)
        if type(y) is int and not INT_MIN <= y <= INT_MAX:
            bad_labels += 1
        else:
            labels.add(f"a{i}")
    return good, bad, labels, bad_labels


def test_a_drain_with_out_of_range_integers_loses_only_those_records():
    client = Client(UNREACHABLE)
    good, bad, labels, bad_labels = log_mix(client, 3_000)
    buffer = client._buffer
    rows, chunks, label_rows = buffer.drain()
    stats = ClientStats()
    out = batcher().predictions(rows, chunks, stats)
    got = [r.prediction_id for _k, v, _n in out for r in decode_batch(v).records]
    assert sorted(got) == sorted(good) and stats.dropped_invalid == bad
    label_out = batcher().labels(label_rows, stats.labels)
    got_labels = [p for _k, v, _n in label_out for p in decode_labels(v).columns.prediction_id]
    assert sorted(got_labels) == sorted(labels) and stats.labels.dropped_invalid == bad_labels


def test_hashed_features_with_an_integer_beyond_64_bits_lose_only_their_record():
    """The PII hash would hide the value the contract refuses (and the text of an
    integer of more than 4,300 digits cannot even be made): checked before hashing."""
    pii = PiiPolicy(hash=["user"], secret="s")
    rows = [as_row(record(prediction_id=f"p{i}", features={"user": v, "amount": 1.0}))
            for i, v in enumerate([42, 2**64, 10**5000, INT_MAX, "u7", -(2**63) - 1])]
    stats = StreamStats()
    out = Batcher(1_000, 1_000_000, Sampler(), pii).predictions(rows, [], stats)
    kept = [r for _k, v, _n in out for r in decode_batch(v).records]
    assert [r.prediction_id for r in kept] == ["p0", "p3", "p4"] and stats.dropped_invalid == 3
    assert kept[0].features["user"] == pii.hash_value(42)
    with pytest.raises(RecordError) as exc:
        upload_reference("http://127.0.0.1:1", "m", [{"user": 1}, {"user": 2**64}], pii=pii)
    assert (exc.value.field, exc.value.reason) == ("rows[1].features.user", OUT_OF_RANGE)


@hsettings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=False)
                          | st.sampled_from([10**400, -(10**400), 2**64, INT_MAX, INT_MIN, INT_MIN - 1]),
                          st.integers(min_value=-(2**70), max_value=2**70) | st.none()),
                min_size=1, max_size=40))
def test_any_mix_of_integers_is_batched_without_raising_and_kept_iff_within_64_bits(values):
    def fits(v):
        return v is None or isinstance(v, float) or INT_MIN <= v <= INT_MAX

    rows = [("m", {"x": x}, "1", f"p{i}", T0, None, None, y, None, None) for i, (x, y) in enumerate(values)]
    stats = StreamStats()
    out = batcher().predictions(rows, [], stats)
    kept = [r for _k, v, _n in out for r in decode_batch(v).records]
    expected = [(f"p{i}", x, y) for i, (x, y) in enumerate(values) if fits(x) and fits(y)]
    assert [(r.prediction_id, r.features["x"], r.predicted_label) for r in kept] == expected
    assert stats.dropped_invalid == len(values) - len(expected)


async def test_the_clients_counters_add_up_after_good_and_bad_records_on_a_real_broker(kafka_bootstrap):
    tag = uuid.uuid4().hex[:8]
    topic, labels_topic = f"pred-{tag}", f"labels-{tag}"
    with Client(kafka_bootstrap, topic, labels_topic=labels_topic, linger_ms=20, batch_size=500) as fw:
        good, bad, labels, bad_labels = log_mix(fw, 3_000)
        assert await asyncio.to_thread(fw.flush, 60)
        s = fw.stats
    assert (s.sent, s.dropped_invalid, s.buffered) == (len(good), bad, 0)
    assert s.accepted == len(good) + bad == (s.sent + s.sampled_out + s.dropped_invalid
                                             + s.dropped_send_failed + s.dropped_closed + s.buffered)
    ls = s.labels
    assert (ls.sent, ls.dropped_invalid) == (len(labels), bad_labels)
    assert ls.accepted == ls.sent + ls.dropped_invalid + ls.dropped_send_failed + ls.buffered
    batches = await consume(kafka_bootstrap, topic, decode_batch, len(good))
    assert all(b.errors == [] for b in batches)
    assert sorted(p for b in batches for p in b.columns.prediction_id) == sorted(good)
    got = await consume(kafka_bootstrap, labels_topic, decode_labels, len(labels))
    assert sorted(p for b in got for p in b.columns.prediction_id) == sorted(labels)


# -- the API: 422 naming the field ----------------------------------------------------
async def test_http_ingest_answers_422_naming_the_field_of_an_integer_beyond_64_bits(settings, store):
    app = create_app(settings, store)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            for place, field in PLACES:
                for value in BEYOND:
                    records = [record(prediction_id=f"p{i}") for i in range(3)] + [record(**place(value))]
                    resp = await http.post("/v1/ingest", content=json.dumps({"records": records}),
                                           headers={"content-type": "application/json"})
                    assert resp.status_code == 422, (field, value, resp.text)
                    body = resp.json()
                    assert (body["code"], body["field"]) == ("invalid_record", f"records[3].{field}")
                    assert "integer beyond 64 bits" in body["message"]
            resp = await http.post("/v1/ingest", content=json.dumps({"records": [
                record(features={"s": "ok"}), record(features={"s": "\ud800"})]}),
                headers={"content-type": "application/json"})
            assert (resp.status_code, resp.json()["field"]) == (422, "records[1]")


async def test_reference_rows_with_an_integer_beyond_64_bits_answer_422_naming_row_and_field(settings, store):
    app = create_app(settings, store)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    await store.put_model_config("ref", ModelConfig())
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        for value in BEYOND:
            for row, field in (({"amount": value, "s": 0.5, "y": 1}, "rows[2].features.amount"),
                               ({"amount": 1.0, "s": value, "y": 1}, "rows[2].score"),
                               ({"amount": 1.0, "s": 0.5, "y": value}, "rows[2].predicted_label")):
                rows = [{"amount": 1, "s": 0.5, "y": 0}] * 2 + [row]
                resp = await http.post("/v1/models/ref/reference", content=json.dumps(
                    {"rows": rows, "score_column": "s", "label_column": "y"}),
                    headers={"content-type": "application/json"})
                assert (resp.status_code, resp.json()["field"]) == (422, field), resp.text
    assert await store.reference("ref") is None


async def test_reference_rows_with_a_lone_surrogate_answer_422_naming_the_row(settings, store):
    """A string the wire cannot carry (a lone surrogate, as JSON's \\ud800 escape gives) is
    refused at upload, not a 500 when the profile is stored."""
    app = create_app(settings, store)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        assert (await http.put("/v1/models/ref", json={})).status_code in (200, 201)
        for row, field in (({"city": "\ud800"}, "rows[2]"), ({"\udfff": "x"}, "rows[2].features")):
            rows = [{"city": "Paris"}, {"city": "Lyon"}, row]
            resp = await http.post("/v1/models/ref/reference", content=json.dumps({"rows": rows}),
                                   headers={"content-type": "application/json"})
            assert (resp.status_code, resp.json()["field"]) == (422, field), resp.text
        assert await store.reference("ref") is None


async def test_reference_dataframes_keep_uint64_and_refuse_python_ints_beyond_64_bits(api_url,  # noqa: F811
                                                                                      store):
    await store.put_model_config("frame", ModelConfig())
    frame = pd.DataFrame({"count": np.array([1, 2**63, 2**64 - 1], dtype=np.uint64)})
    answer = await asyncio.to_thread(upload_reference, api_url, "frame", frame)
    assert answer["count"] == 3 and answer["features"] == ["count"]
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0], "big": pd.Series([1, 10**400, 3], dtype=object)})
    with pytest.raises(urllib.error.HTTPError) as exc:
        await asyncio.to_thread(upload_reference, api_url, "frame", frame)
    assert exc.value.code == 422 and json.loads(exc.value.read())["field"] == "rows[1].features.big"


async def test_reference_upload_from_csv_names_the_row_and_field(tmp_path, api_url, store):  # noqa: F811
    await store.put_model_config("shop", ModelConfig())
    for value, field in ((2**64, "rows[1].features.amount"), (10**400, "rows[1].features.amount"),
                         (INT_MIN - 1, "rows[1].features.amount")):
        csv = tmp_path / "big.csv"
        csv.write_text(f"amount,score\n1,0.1\n{value},0.2\n")
        result = await asyncio.to_thread(CliRunner().invoke, cli_app, [
            "reference", "upload", "shop", "--csv", str(csv), "--score-column", "score", "--url", api_url])
        assert result.exit_code == 1 and f"(field {field})" in result.stderr, result.output
    assert await store.reference("shop") is None


# -- the aggregator and the joiner: dead-lettered with the reason ----------------------
def row(pid: str, **over) -> list:
    fields = {"model_version": "1", "prediction_id": pid, "event_time": T0 + 1.0,
              "features": {"x": 1.0}, "score": None, "class_probabilities": None,
              "predicted_label": None, "slices": {}, "latency_ms": None}
    return list((fields | over).values())


def columns_message(model: str, rows: list[dict]) -> bytes:
    """A schema-version-2 message as a non-SDK producer might write it."""
    n = len(rows)
    cols = {"model_version": ["1"] * n, "prediction_id": [r["pid"] for r in rows],
            "event_time": [r.get("event_time", T0 + 2.0) for r in rows],
            "features": {"x": [r.get("x", 1.0) for r in rows]},
            "score": [r.get("score") for r in rows], "predicted_label": [r.get("label") for r in rows]}
    return msgpack.packb({"v": 2, "m": model, "c": cols})


async def dead_letters(settings, expected: int) -> list[tuple[str, str]]:
    consumer = AIOKafkaConsumer(settings.dead_letter_topic, bootstrap_servers=settings.kafka_bootstrap,
                                auto_offset_reset="earliest", group_id=None)
    await consumer.start()
    out: list[tuple[str, str]] = []
    try:
        while len(out) < expected:
            batch = await consumer.getmany(timeout_ms=10_000)
            assert batch, f"dead letters missing; got {out}"
            for msgs in batch.values():
                for m in msgs:
                    headers = dict(m.headers)
                    out.append((headers["reason"].decode(), headers["detail"].decode()))
    finally:
        await consumer.stop()
    return out


async def test_the_aggregator_profiles_64_bit_extremes_and_dead_letters_bignums(settings, store):
    """MessagePack carries no integer beyond 64 bits, so a non-SDK producer can send one
    only as an extension type: each such record is dead-lettered (wrong_type, naming the
    field) and the rest of its message is profiled, the 64-bit extremes included."""
    v1 = msgpack.packb({"v": 1, "m": "agg", "r": [
        row("r0"), row("r1", features={"x": INT_MAX}), row("r2", score=2**63), row("r3"),
        row("r4", predicted_label=INT_MAX), row("r5", latency_ms=2**63), row("r6", features={"x": INT_MIN}),
        row("r7", features={"x": BIGNUM}), row("r8", score=BIGNUM),
    ]})
    v2 = columns_message("agg", [
        {"pid": "c0"}, {"pid": "c1", "x": INT_MAX}, {"pid": "c2", "score": 2**63},
        {"pid": "c3", "label": INT_MAX}, {"pid": "c4", "label": BIGNUM}, {"pid": "c5", "x": INT_MIN},
    ])
    async with running(settings, store, "aggregator"):
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
        await producer.start()
        try:
            for value in (v1, v2, msgpack.packb({"v": 1, "m": "agg", "r": [row("last")]})):
                await producer.send_and_wait(settings.predictions_topic, value, key=b"agg")
        finally:
            await producer.stop()

        async def counted() -> bool:  # r0-r6, c0-c3 and c5, last: the aggregator lived through the rest
            return await window_counts(store, "agg") == {T0: 13}

        await wait_for(counted, timeout=60)
    (profile,) = await store.window_profiles("agg", await store.window_members("agg", 0, float("inf")))
    x = profile.features["x"].numeric
    assert (x.min, x.max) == (float(INT_MIN), float(INT_MAX))  # stored, and read back
    letters = await dead_letters(settings, 2)
    assert [reason for reason, _d in letters] == ["wrong_type", "wrong_type"]
    fields = sorted(e["field"] for _r, detail in letters for e in json.loads(detail))
    assert fields == ["features.x", "predicted_label", "score"]


def test_labels_from_the_wire_keep_64_bit_extremes_and_refuse_bignums():
    value = msgpack.packb({"v": 1, "k": "labels", "m": "j", "c": {
        "prediction_id": ["p0", "p1", "p2", "p3"], "label": [1, BIGNUM, INT_MAX, INT_MIN],
        "event_time": [T0] * 4}})
    decoded = decode_labels(value)
    assert decoded.columns.label == [1, INT_MAX, INT_MIN]
    assert [(i, e.field, e.reason) for i, e in decoded.errors] == [(1, "label", "wrong_type")]
