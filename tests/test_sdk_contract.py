"""The prediction record contract and its wire encoding."""

from __future__ import annotations

import dataclasses
import math

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdk.record import MAX_FEATURES, PredictionRecord, RecordError, validate_record
from sdk.wire import WireError, decode_batch, encode_batch

VALID = {
    "model_id": "m", "model_version": "3", "prediction_id": "p1", "event_time": 1.7e9,
    "features": {"x": 1.5, "c": "red", "b": True, "n": None, "nan": math.nan},
    "score": 0.3, "predicted_label": "yes", "slices": {"country": "DE"}, "latency_ms": 4.2,
}


def test_valid_record_keeps_every_field():
    r = validate_record(VALID)
    assert (r.model_id, r.model_version, r.prediction_id, r.event_time) == ("m", "3", "p1", 1.7e9)
    assert r.features["c"] == "red" and r.features["b"] is True and r.features["n"] is None
    assert (r.score, r.predicted_label, r.slices, r.latency_ms) == (0.3, "yes", {"country": "DE"}, 4.2)


@pytest.mark.parametrize("field,value", [
    ("model_id", ""), ("model_id", 7), ("model_version", None), ("prediction_id", "x" * 300),
    ("event_time", "yesterday"), ("event_time", math.inf), ("event_time", -1.0),
    ("score", "high"), ("score", True), ("latency_ms", [1]), ("predicted_label", 1.5),
    ("features.x", [1]), ("features.x", {"a": 1}), ("features.x", "s" * 2000), ("slices.k", 3),
    ("class_probabilities.a", 1.5),
])
def test_invalid_field_is_named(field, value):
    data = dict(VALID)
    top, _, sub = field.partition(".")
    data[top] = {sub: value} if sub else value
    with pytest.raises(RecordError) as exc:
        validate_record(data)
    assert exc.value.field == field


def test_too_many_features_is_rejected():
    data = dict(VALID, features={f"f{i}": 1 for i in range(MAX_FEATURES + 1)})
    with pytest.raises(RecordError, match="features"):
        validate_record(data)


def test_batch_round_trip():
    records = [validate_record(dict(VALID, prediction_id=f"p{i}")) for i in range(3)]
    batch = decode_batch(encode_batch(records))
    assert batch.model_id == "m" and batch.errors == []
    assert [r.prediction_id for r in batch.records] == ["p0", "p1", "p2"]
    assert math.isnan(batch.records[0].features["nan"])
    assert batch.records[0].features["x"] == 1.5


def test_a_batch_holds_one_model():
    with pytest.raises(ValueError):
        encode_batch([PredictionRecord("a", "1", "p", 1.0), PredictionRecord("b", "1", "p", 1.0)])


@pytest.mark.parametrize("value,reason", [
    (b"\xc1\xc1", "undecodable"),
    (msgpack.packb([1, 2]), "not a map"),
    (msgpack.packb({"v": 5, "m": "m", "r": []}), "unknown schema version"),
    (msgpack.packb({"v": 2, "m": "m", "c": []}), "columns"),
    (msgpack.packb({"v": 2, "m": "m", "c": {"prediction_id": ["a"], "model_version": ["1", "2"],
                                            "event_time": [1.0]}}), "model_version"),
    (msgpack.packb({"v": 1, "r": []}), "model_id"),
    (msgpack.packb({"v": 1, "m": "m", "r": "x"}), "not a list"),
    (b"\xa2\xff\xfe", "undecodable"),  # a msgpack string that is not UTF-8
])
def test_undecodable_messages_raise_wire_error_with_reason(value, reason):
    with pytest.raises(WireError, match=reason):
        decode_batch(value)


def test_bad_records_are_reported_by_index_and_the_rest_kept():
    value = msgpack.packb({"v": 1, "m": "m", "r": [
        ["1", "a", 1.0, {}, None, None, None, {}, None],
        ["1", "b", 1.0, {"x": {"nested": 1}}, None, None, None, {}, None],
        ["too", "short"],
        ["1", "c", 2.0, {}, 0.5, None, None, {}, None],
    ]})
    batch = decode_batch(value)
    assert [r.prediction_id for r in batch.records] == ["a", "c"]
    assert [(i, e.field) for i, e in batch.errors] == [(1, "features.x"), (2, "record")]


@given(st.binary(max_size=512))
def test_decoder_never_raises_anything_but_wire_error_on_arbitrary_bytes(data):
    try:
        batch = decode_batch(data)
    except WireError:
        return
    assert len(batch.records) + len(batch.errors) >= 0


def columns_message(**over) -> bytes:
    cols = {"model_version": ["1", "1", "1", "1"], "prediction_id": ["a", "b", "c", "d"],
            "event_time": [1.0, 2.0, 3.0, 4.0],
            "features": {"x": [1.0, None, float("nan"), 2], "s": ["u", "v", None, True]},
            "slices": {"country": ["DE", None, "FR", "DE"]}, "score": [0.1, None, 0.3, 0.4]}
    cols.update(over)
    return msgpack.packb({"v": 2, "m": "m", "c": cols})


def test_columnar_batch_round_trip_and_missing_values():
    batch = decode_batch(columns_message())
    assert batch.errors == [] and len(batch.columns) == 4
    r = batch.records
    assert r[1].features == {"s": "v"} and r[1].score is None and r[1].slices == {}
    assert math.isnan(r[2].features["x"]) and r[3].features["s"] is True
    assert r[0].slices == {"country": "DE"}


@pytest.mark.parametrize("over,index,field,reason", [
    ({"event_time": [1.0, "noon", 3.0, 4.0]}, 1, "event_time", "wrong_type"),
    ({"event_time": [1.0, 2.0, -3.0, 4.0]}, 2, "event_time", "out_of_range"),
    ({"score": [0.1, float("inf"), 0.3, 0.4]}, 1, "score", "not_finite"),
    ({"prediction_id": ["a", "", "c", "d"]}, 1, "prediction_id", "missing_field"),
    ({"features": {"x": [1.0, 2.0, [3], 4.0]}}, 2, "features.x", "wrong_type"),
    ({"features": {"s": ["u", "v", "w" * 5000, "x"]}}, 2, "features.s", "too_large"),
    ({"slices": {"k": ["a", 7, None, "b"]}}, 1, "slices.k", "wrong_type"),
    ({"predicted_label": [1, 2.5, None, "x"]}, 1, "predicted_label", "wrong_type"),
    # string columns are checked on their distinct values: a bad value among repeats
    ({"features": {"s": ["u", b"u", "u", "u"]}}, 1, "features.s", "wrong_type"),
    ({"features": {"s": ["u", "u", ["u"], "u"]}}, 2, "features.s", "wrong_type"),
    ({"features": {"s": ["u", "u", "u", "w" * 5000]}}, 3, "features.s", "too_large"),
    ({"slices": {"k": ["a", "a", None, b"a"]}}, 3, "slices.k", "wrong_type"),
])
def test_columnar_bad_values_are_reported_by_index_and_the_rest_kept(over, index, field, reason):
    batch = decode_batch(columns_message(**over))
    assert [(i, e.field, e.reason) for i, e in batch.errors] == [(index, field, reason)]
    assert [r.prediction_id for r in batch.records] == [p for i, p in enumerate("abcd") if i != index]


def test_string_column_with_values_equal_across_types_is_valid():
    # True == 1 == 1.0 collapse to one distinct value; all three are valid feature values
    batch = decode_batch(columns_message(features={"s": ["u", True, 1, 1.0]}))
    assert batch.errors == [] and batch.columns.features["s"] == ["u", True, 1, 1.0]


def test_too_many_feature_columns_rejects_every_record():
    wide = {f"f{i}": [1.0] * 4 for i in range(MAX_FEATURES + 1)}
    batch = decode_batch(columns_message(features=wide))
    assert len(batch.errors) == 4 and len(batch.columns) == 0
    assert {e.reason for _i, e in batch.errors} == {"too_large"}


column_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(), st.text(max_size=5),
    st.binary(max_size=3), st.lists(st.integers(-(2**63), 2**63 - 1), max_size=2),
)


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(st.dictionaries(st.sampled_from(["model_version", "prediction_id", "event_time", "score",
                                        "predicted_label", "latency_ms", "features", "slices",
                                        "class_probabilities"]),
                       st.one_of(st.lists(column_values, min_size=0, max_size=4),
                                 st.lists(st.text(max_size=3), min_size=4, max_size=4),
                                 st.dictionaries(st.text(max_size=3), st.lists(column_values, max_size=4),
                                                 max_size=3),
                                 column_values)))
def test_columnar_decoder_never_raises_anything_but_wire_error(cols):
    try:
        batch = decode_batch(msgpack.packb({"v": 2, "m": "m", "c": cols}))
    except WireError:
        return
    n = len(batch.columns) + len(batch.errors)
    assert n == len(cols.get("prediction_id", []))
    for r in batch.records:  # whatever survives is valid under the record contract
        validate_record(dataclasses.asdict(r))


def test_a_map_keyed_by_an_array_is_undecodable_not_a_crash():
    value = msgpack.packb({(1, 2): 3})  # valid MessagePack; no Python dict can hold it
    with pytest.raises(WireError) as exc:
        decode_batch(value)
    assert exc.value.reason == "undecodable"


def test_an_empty_columnar_batch_has_no_records_and_no_errors():
    empty = {"prediction_id": [], "model_version": [], "event_time": [], "features": {"x": []}}
    batch = decode_batch(msgpack.packb({"v": 2, "m": "m", "c": empty}))
    assert (len(batch.columns), batch.errors) == (0, [])
