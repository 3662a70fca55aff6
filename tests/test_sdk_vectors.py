"""Vector features in the SDK and on the wire: what is carried, what is dropped (the vector
only, never the record), and the wire's own checks for producers other than the SDK."""

from __future__ import annotations

import array

import msgpack
import numpy as np
import pytest

from sdk.batching import Batcher
from sdk.columns import RecordColumns
from sdk.record import PredictionRecord, RecordError, validate_record
from sdk.sampling import Sampler
from sdk.stats import StreamStats
from sdk.vectors import MAX_VECTOR_DIM, split_vectors, vector_bytes, vector_values
from sdk.wire import decode_batch, encode_batch, encode_columns


def row(i: int, emb) -> tuple:
    return ("m", {"x": float(i), "emb": emb}, "1", f"p{i}", 1.0, None, None, None, None, None)


@pytest.mark.parametrize("value,reason", [
    ([1.0], "vector_dimension"),
    ([0.0] * (MAX_VECTOR_DIM + 1), "vector_dimension"),
    ([1.0, "a"], "wrong_type"),
    ([1.0, float("nan")], "not_finite"),
    ([1.0, 1e39], "not_finite"),  # beyond float32
    (np.array([[1.0, 2.0]]), "wrong_type"),
    (np.array(["a", "b"]), "wrong_type"),
    (np.array([1.0, np.inf]), "not_finite"),
])
def test_bad_vectors_are_refused_with_their_reason(value, reason):
    with pytest.raises(RecordError) as exc:
        vector_bytes(value, "emb")
    assert (exc.value.field, exc.value.reason) == ("features.emb", reason)


def test_every_input_kind_gives_the_same_float32_bytes():
    v = [0.5, -1.25, 3.0]
    want = np.array(v, "<f4").tobytes()
    for given in (v, tuple(v), array.array("d", v), np.array(v), np.array(v, np.float32)):
        assert vector_bytes(given, "e") == want
    ints = np.arange(1.0, 4.0, dtype="<f4").tobytes()
    assert vector_bytes(np.array([1, 2, 3]), "e") == vector_bytes([1, 2, 3], "e") == ints
    assert vector_values(want) == v


def test_the_sdk_drops_bad_vectors_and_keeps_their_records():
    rows = [row(0, np.arange(4, dtype=np.float32)), row(1, [1.0, 2.0, float("inf"), 0.0]),
            row(2, [1.0, 2.0, 3.0]), row(3, "text"), row(4, None), row(5, (4.0, 3.0, 2.0, 1.0))]
    stats = StreamStats()
    [(_key, value, n)] = Batcher(1000, 1_000_000, Sampler(None, 1.0), None).predictions(rows, [], stats)
    assert n == 6 and stats.dropped_invalid == 0 and stats.vectors_dropped_invalid == 3
    batch = decode_batch(value)
    assert batch.errors == [] and batch.columns.vector_drops == []
    emb = batch.columns.vectors["emb"]
    assert [None if v is None else vector_values(v) for v in emb] == [
        [0.0, 1.0, 2.0, 3.0], None, None, None, None, [4.0, 3.0, 2.0, 1.0]]
    assert list(batch.columns.features["x"]) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert msgpack.unpackb(value)["c"]["vectors"]["emb"][0] == np.arange(4, dtype="<f4").tobytes()


def test_the_wire_refuses_bad_vectors_of_other_producers_and_keeps_the_records():
    n = 5
    cols = RecordColumns("m", ["1"] * n, [f"p{i}" for i in range(n)], [1.0] * n, {"x": [1.0] * n})
    good = np.ones(3, "<f4").tobytes()
    cols.vectors = {"emb": [good, good[:8], b"\x00" * 10, None, "not bytes"]}
    batch = decode_batch(encode_columns(cols))
    assert len(batch.columns) == n and batch.errors == []
    assert [v is None for v in batch.columns.vectors["emb"]] == [False, True, True, True, True]
    assert [(i, e.reason) for i, e in batch.columns.vector_drops] == [
        (1, "vector_dimension"), (2, "wrong_type"), (4, "wrong_type")]


def test_a_name_both_scalar_and_vector_is_refused_as_a_vector():
    cols = RecordColumns("m", ["1"], ["p"], [1.0], {"emb": [1.0]})
    cols.vectors = {"emb": [np.ones(3, "<f4").tobytes()]}
    batch = decode_batch(encode_columns(cols))
    assert batch.columns.vectors == {} and list(batch.columns.features["emb"]) == [1.0]
    assert batch.columns.vector_drops[0][1].field == "features.emb"


def test_records_with_vectors_round_trip_and_validate():
    r = validate_record({"model_id": "m", "model_version": "1", "prediction_id": "p", "event_time": 1.0,
                         "features": {"emb": [0.5, 1.5], "x": 2.0}})
    assert decode_batch(encode_batch([r])).records == [r]
    with pytest.raises(RecordError, match="features.emb"):
        validate_record({"model_id": "m", "model_version": "1", "prediction_id": "p", "event_time": 1.0,
                         "features": {"emb": [0.5]}})


def test_split_vectors_fixes_the_length_by_the_declared_dimension_or_the_first_vector():
    features = {"e": [[1.0, 2.0], [1.0, 2.0, 3.0], None]}
    vectors, dropped = split_vectors(features, {"e": 3})
    assert [v is None for v in vectors["e"]] == [True, False, True] and features == {}
    assert dropped[0][0] == 0 and dropped[0][1].reason == "vector_dimension"


def test_wrong_typed_scalar_in_a_vector_column_drops_only_that_value():
    features = {"e": [[1.0, 2.0], 7.5]}
    vectors, dropped = split_vectors(features)
    assert vectors["e"][1] is None and dropped[0][1].reason == "wrong_type"
    assert PredictionRecord("m", "1", "p", 0.0, {"e": [1.0, 2.0]}).features["e"] == [1.0, 2.0]
