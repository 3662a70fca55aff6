"""Packed columns of wire versions 3 (features) and 4 (features, model_version, event_time,
score, latency_ms): what the SDK packs, that the aggregator reads the same records and builds
the same profile as from arrays, and what a producer's malformed packed column costs (the
message, or only the records it makes invalid)."""

from __future__ import annotations

import math
from array import array

import msgpack
import numpy as np
import pytest

from sdk.columns import RecordColumns, validate_columns
from sdk.errors import WireError
from sdk.packed import DictionaryColumn, pack_column
from sdk.record import MAX_STRING_LENGTH, TOO_LARGE, PredictionRecord
from sdk.wire import (
    ARRAYS_VERSION,
    COLUMNS_VERSION,
    PACKED_FEATURES_VERSION,
    decode_batch,
    encode_batch,
    encode_columns,
)
from sketches.columns import subset
from sketches.profile import WindowProfile


def records(n: int = 300, seed: int = 0) -> list[PredictionRecord]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        features = {"x": float(rng.normal()), "c": f"v{rng.integers(40)}", "k": int(rng.integers(5)),
                    "b": bool(i % 2), "w": None if i % 7 == 0 else float(i),
                    "t": "\x1ftagged" if i % 5 == 0 else "plain", "e": float("nan") if i % 3 else np.inf}
        if i % 11 == 5:  # (a first value that is a string: validation's distinct values hint)
            features["c"] = None
        out.append(PredictionRecord("m", "1" if i % 4 else "2", f"p{i}", 1_700_000_000.0 + i, features,
                                    score=0.5, latency_ms=float(i % 9)))
    return out


def arrays_message(recs: list[PredictionRecord]) -> bytes:
    cols = RecordColumns.from_records("m", recs)
    return msgpack.packb({"v": ARRAYS_VERSION, "m": "m", "c": cols.to_wire()}, use_bin_type=True)


def columns_message(features: dict, n: int) -> bytes:
    return msgpack.packb({"v": COLUMNS_VERSION, "m": "m", "c": {
        "model_version": ["1"] * n, "prediction_id": [f"p{i}" for i in range(n)],
        "event_time": [1.0] * n, "features": features}}, use_bin_type=True)


def test_floats_and_strings_are_packed_the_rest_stays_arrays():
    wire = RecordColumns.from_records("m", records()).to_wire(packed=True)["features"]
    assert {k for k, v in wire.items() if isinstance(v, dict)} == {"x", "c", "t", "e"}
    assert set(wire["x"]) == {"f8"} and set(wire["c"]) == {"s", "i"}
    assert len(wire["c"]["i"]) == 300  # 41 dictionary values: one byte per code
    assert isinstance(wire["k"], list) and isinstance(wire["w"], list) and isinstance(wire["b"], list)
    assert pack_column([1.0, 2]) == [1.0, 2]  # an int among floats: exact as it was sent


def test_a_version_3_message_reads_back_the_records_it_was_built_from():
    recs = records()
    back = decode_batch(encode_batch(recs))
    assert back.errors == []
    for got, sent in zip(back.records, recs, strict=True):
        want = {k: v for k, v in sent.features.items() if v is not None}
        assert got.features.keys() == want.keys()
        for k, v in want.items():
            assert type(got.features[k]) is type(v)
            assert got.features[k] == v or (math.isnan(v) and math.isnan(got.features[k]))


def validated_message(recs: list[PredictionRecord]) -> bytes:
    """A message as the SDK's client sends it: validated first, packed with validation's hints."""
    cols = RecordColumns.from_records("m", recs)
    valid, errors = validate_columns("m", cols.to_wire())
    assert errors == [] and "c" in valid.distinct
    return encode_columns(valid)


@pytest.mark.parametrize("encode", [encode_batch, validated_message])
def test_the_profile_of_a_packed_message_is_the_profile_of_its_arrays_byte_for_byte(encode):
    """Also the order in which categories enter the profile: a packed column is counted per
    dictionary entry, and the SDK lists a dictionary in order of first occurrence."""
    recs = records()
    packed, arrays = decode_batch(encode(recs)), decode_batch(arrays_message(recs))
    assert isinstance(packed.columns.features["c"], DictionaryColumn)
    assert isinstance(arrays.columns.features["c"], list)
    assert packed.columns.features["c"].values == list(dict.fromkeys(arrays.columns.features["c"]))
    a = WindowProfile("m", 0, 300, slice_features=["c"])
    b = WindowProfile("m", 0, 300, slice_features=["c"])
    a.add_columns(packed.columns)
    b.add_columns(arrays.columns)
    assert a.to_bytes() == b.to_bytes()
    assert a.features["c"].null_count == 27 and a.features["t"].categorical.count == 300


def test_the_parts_of_a_packed_message_profile_as_the_parts_of_its_arrays():
    """A slice's rows, a version's and a look's part keep the whole message's dictionary,
    whose order is not their values' order: their profiles are still the arrays' ones."""
    recs = [PredictionRecord("m", "1" if i < 150 else "2", f"p{i}", 1.0 + i,
                             {"c": "a" if i % 2 == 0 or i % 4 == 3 else "b"},
                             slices={"s": "x" if i % 2 == 0 else "y"}) for i in range(300)]
    packed, arrays = decode_batch(encode_batch(recs)).columns, decode_batch(arrays_message(recs)).columns
    assert packed.features["c"].values == ["a", "b"]
    for part in (lambda c: c, lambda c: c.take(list(range(1, 300, 2))), lambda c: c.split(75)[1]):
        a = WindowProfile("m", 0, 300, slice_features=["c"])
        b = WindowProfile("m", 0, 300, slice_features=["c"])
        a.add_columns(part(packed))
        b.add_columns(part(arrays))
        assert a.to_bytes() == b.to_bytes()
        y = a.slices["s"].profiles["y"].features["c"].categorical.exact
        assert list(y) == list(dict.fromkeys(v for v, s in zip(part(arrays).features["c"],
                                                              part(arrays).slices["s"], strict=True)
                                             if s == "y"))


def test_take_split_and_subset_keep_the_packed_values():
    cols = decode_batch(encode_batch(records(20))).columns
    plain = RecordColumns.from_records("m", records(20))
    keep = [3, 0, 11, 19]
    for part, want in ((cols.take(keep), plain.take(keep)), (cols.split(7)[1], plain.split(7)[1]),
                       (subset(cols, np.array(keep), ["x", "c"]), subset(plain, np.array(keep), ["x", "c"]))):
        assert isinstance(part.features["c"], DictionaryColumn)
        assert isinstance(part.features["x"], array)
        assert list(part.features["c"]) == want.features["c"]
        assert part.features["x"].tolist() == want.features["x"]


def test_an_invalid_dictionary_value_refuses_only_the_records_that_hold_it():
    codes = bytes([0, 1, 0, 2, 0])
    batch = decode_batch(columns_message({"c": {"s": ["ok", "x" * (MAX_STRING_LENGTH + 1), 7],
                                                "i": codes}}, 5))
    assert [(i, e.field, e.reason) for i, e in batch.errors] == [
        (1, "features.c", TOO_LARGE), (3, "features.c", "wrong_type")]
    assert batch.columns.prediction_id == ["p0", "p2", "p4"]
    assert list(batch.columns.features["c"]) == ["ok"] * 3


def test_a_value_listed_twice_in_a_dictionary_is_counted_with_both_codes():
    codes = b"\x00\x00\x01\x00\x01\x00\x02\x00"  # little-endian 2-byte codes 0, 1, 1, 2
    batch = decode_batch(columns_message({"c": {"s": ["a", "b", "a"], "i": codes}}, 4))
    profile = WindowProfile("m", 0, 300)
    profile.add_columns(batch.columns)
    assert profile.features["c"].categorical.to_dict()["exact"] == {"a": 2, "b": 2}


@pytest.mark.parametrize("column,reason", [
    ({"f8": b"\x00" * 16}, "must pack 3 doubles"),
    ({"f8": [1.0, 2.0, 3.0]}, "must be an array"),
    ({"s": ["a"], "i": b"\x00\x00"}, "must pack 3 codes"),
    ({"s": ["a"], "i": b"\x00" * 24}, "must pack 3 codes"),  # 8-byte codes
    ({"s": ["a"], "i": b"\x00\x01\x00"}, "beyond its dictionary"),
    ({"s": ["a"], "i": b"\x00" * 3, "f8": b""}, "must be an array"),
])
def test_a_malformed_packed_column_refuses_the_message_naming_it(column, reason):
    with pytest.raises(WireError, match=f"features.c.*{reason}"):
        decode_batch(columns_message({"c": column}, 3))


def test_version_2_messages_carry_arrays_only():
    value = msgpack.packb({"v": ARRAYS_VERSION, "m": "m", "c": {
        "model_version": ["1"], "prediction_id": ["p"], "event_time": [1.0],
        "features": {"x": {"f8": b"\x00" * 8}}}}, use_bin_type=True)
    with pytest.raises(WireError, match="column x must be a list"):
        decode_batch(value)


def test_dead_lettered_columns_stay_packed_and_read_back():
    cols = decode_batch(encode_batch(records(10))).columns.take([1, 4])
    again = decode_batch(encode_columns(cols))
    assert isinstance(again.columns.features["c"], DictionaryColumn)
    assert [r.prediction_id for r in again.records] == ["p1", "p4"]
    assert encode_batch(again.records) == encode_batch(cols.records())  # (NaN != NaN: as bytes)


def test_version_4_packs_versions_times_scores_and_latencies_where_they_can_be():
    recs = records(12)
    wire = RecordColumns.from_records("m", recs).to_wire(packed=True)
    assert wire["model_version"]["s"] == ["2", "1"] and len(wire["model_version"]["i"]) == 12
    assert {k for k in ("event_time", "score", "latency_ms") if set(wire[k]) == {"f8"}} == {
        "event_time", "score", "latency_ms"}
    assert isinstance(wire["prediction_id"], list)
    recs[3] = PredictionRecord("m", "1", "p3", 1_700_000_003, {"x": 1.0}, score=None)  # an int time
    wire = RecordColumns.from_records("m", recs).to_wire(packed=True)
    assert isinstance(wire["event_time"], list) and isinstance(wire["score"], list)
    back = decode_batch(encode_batch(recs))
    assert back.errors == [] and [r.event_time for r in back.records] == [r.event_time for r in recs]
    assert [(r.model_version, r.score, r.latency_ms) for r in back.records] == [
        (r.model_version, r.score, r.latency_ms) for r in recs]
    assert type(back.records[3].event_time) is int


def message(columns: dict, n: int, version: int = COLUMNS_VERSION) -> bytes:
    base = {"model_version": ["1"] * n, "prediction_id": [f"p{i}" for i in range(n)],
            "event_time": [1.0] * n, "features": {"x": [0.0] * n}}
    return msgpack.packb({"v": version, "m": "m", "c": base | columns}, use_bin_type=True)


def test_invalid_values_in_packed_columns_refuse_only_their_records():
    times = array("d", [1.0, -5.0, float("nan"), 4.0, 5.0, 6.0]).tobytes()
    scores = array("d", [0.5, 0.5, 0.5, float("inf"), 0.5, 0.5]).tobytes()
    versions = {"s": ["1", "", "v" * 300], "i": bytes([0, 0, 0, 0, 1, 2])}
    batch = decode_batch(message({"event_time": {"f8": times}, "score": {"f8": scores},
                                  "model_version": versions}, 6))
    assert [(i, e.field) for i, e in batch.errors] == [
        (1, "event_time"), (2, "event_time"), (3, "score"), (4, "model_version"), (5, "model_version")]
    assert batch.columns.prediction_id == ["p0"]
    assert list(batch.columns.model_version) == ["1"] and batch.columns.event_time.tolist() == [1.0]


@pytest.mark.parametrize("name,column,reason", [
    ("event_time", {"f8": b"\x00" * 16}, "must pack 3 doubles"),
    ("model_version", {"s": ["1"], "i": b"\x00\x01\x00"}, "beyond its dictionary"),
    ("latency_ms", {"i": b"\x00" * 3}, "must be an array"),
])
def test_a_malformed_packed_column_of_version_4_refuses_the_message_naming_it(name, column, reason):
    with pytest.raises(WireError, match=f"column {name} .*{reason}"):
        decode_batch(message({name: column}, 3))


def test_version_3_messages_pack_feature_columns_only():
    value = message({"event_time": {"f8": b"\x00" * 8}}, 1, PACKED_FEATURES_VERSION)
    with pytest.raises(WireError, match="column event_time must be a list"):
        decode_batch(value)
    assert decode_batch(message({}, 1, PACKED_FEATURES_VERSION)).errors == []


def test_unhashable_versions_refuse_only_the_records_that_hold_them():
    used = {"s": ["1", ["x"], {"k": 1}], "i": bytes([0, 1, 0, 2])}
    batch = decode_batch(message({"model_version": used}, 4))
    assert [(i, e.field) for i, e in batch.errors] == [(1, "model_version"), (3, "model_version")]
    unused = decode_batch(message({"model_version": {"s": ["1", ["x"]], "i": bytes(4)}}, 4))
    assert unused.errors == [] and list(unused.columns.model_version) == ["1"] * 4
    as_arrays = decode_batch(message({"model_version": ["1", ["x"], "1", "1"]}, 4, ARRAYS_VERSION))
    assert [(i, e.field) for i, e in as_arrays.errors] == [(1, "model_version")]


def test_a_value_listed_many_times_is_counted_once_per_row():
    col = DictionaryColumn(["1"] * 300 + ["2"], array("H", [k % 301 for k in range(1_000)]))
    assert col.count("1") == list(col).count("1") == 1_000 - 1_000 // 301
    assert col.count("2") == 3 and col.count("3") == 0


def test_many_invalid_dictionary_entries_refuse_exactly_the_records_using_them():
    values = ["ok", *range(1, 300)]  # 299 entries of the wrong type, one of them used
    codes = array("H", [0, 5, 0, 0]).tobytes()
    batch = decode_batch(columns_message({"c": {"s": values, "i": codes}}, 4))
    assert [(i, e.field, e.reason) for i, e in batch.errors] == [(1, "features.c", "wrong_type")]
    assert list(batch.columns.features["c"]) == ["ok"] * 3
