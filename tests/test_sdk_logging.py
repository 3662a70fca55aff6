"""SDK behaviour that needs no broker: footprint, the logging calls, drop counting,
batching, sampling, PII, the label contract and the Prometheus export."""

from __future__ import annotations

import gc
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from prometheus_client import REGISTRY

from sdk import Client, PiiPolicy, Sampler, sample_point
from sdk.batching import Batcher
from sdk.errors import WireError
from sdk.labels import LabelColumns, decode_labels, encode_labels
from sdk.stats import ClientStats
from sdk.tabular import feature_columns, rows
from sdk.wire import decode_batch
from sdk.worker import resolve_compression

UNREACHABLE = "127.0.0.1:1"  # nothing listens: a client never connects


@pytest.mark.integration
def test_importing_sdk_does_not_import_server_dependencies():
    code = ("import sys, sdk; bad = [m for m in ('fastapi', 'redis', 'datasketches', 'numpy', 'pandas', "
            "'aiokafka', 'prometheus_client') if m in sys.modules]; print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_log_prediction_never_raises_and_counts_drops_when_the_buffer_is_full():
    client = Client(UNREACHABLE, max_buffer=10)  # never started: nothing is sent
    results = [client.log_prediction("m", {"x": i}) for i in range(15)]
    assert results == [True] * 10 + [False] * 5
    s = client.stats
    assert (s.accepted, s.buffered, s.dropped_buffer_full, s.dropped) == (10, 10, 5, 5)
    assert client.log_prediction("m", None) is False  # features must be a mapping: refused, counted
    assert client.log_label("m", "p", True) is True and client.stats.labels.accepted == 1


def test_close_counts_what_was_never_sent_and_refuses_later_records():
    client = Client(UNREACHABLE)
    client.log_prediction("m", {"x": 1.0})
    client.log_label("m", "p1", 1)
    client.close(timeout=0.1)
    assert client.log_prediction("m", {"x": 2.0}) is False
    assert client.log_predictions("m", {"x": [1.0, 2.0]}) == 0
    assert client.log_label("m", "p2", 0) is False
    s = client.stats
    assert (s.accepted, s.dropped_closed, s.buffered) == (1, 4, 0)
    assert (s.labels.accepted, s.labels.dropped_closed) == (1, 2)


def test_the_features_dict_is_copied_at_the_call():
    client = Client(UNREACHABLE)
    features = {"x": 1.0}
    client.log_prediction("m", features)
    features["x"] = 99.0
    assert client._buffer.rows[0][1] == {"x": 1.0}


def batcher(**over) -> Batcher:
    kwargs = {"batch_size": 1_000, "max_message_bytes": 1_000_000, "sampler": Sampler(), "pii": None}
    return Batcher(**(kwargs | over))


def rows_of(client: Client) -> list[tuple]:
    return list(client._buffer.rows)


def decoded(messages) -> list:
    return [r for _key, value, _n in messages for r in decode_batch(value).records]


def test_invalid_records_are_dropped_counted_and_the_rest_delivered():
    client = Client(UNREACHABLE)
    client.log_prediction("m", {"x": 1.0}, prediction_id="ok1", score=0.5)
    client.log_prediction("m", {"x": object()}, prediction_id="bad-value")
    client.log_prediction("m", {"x": 1.0}, prediction_id="bad-time", event_time="now")
    client.log_prediction("m", {7: 1.0}, prediction_id="bad-name")
    client.log_prediction("m", {"x": 1.0}, prediction_id="bad-slices", slices={1: "a"})
    client.log_prediction(["unhashable"], {"x": 1.0})
    client.log_prediction("", {"x": 1.0})
    client.log_prediction("m", {"y": "s"}, prediction_id="ok2", slices={"country": "DE"})
    stats = ClientStats()
    records = decoded(batcher().predictions(rows_of(client), [], stats))
    assert [r.prediction_id for r in records] == ["ok1", "ok2"]
    assert records[0].features == {"x": 1.0} and records[0].score == 0.5
    assert records[1].features == {"y": "s"} and records[1].slices == {"country": "DE"}
    assert stats.dropped_invalid == 6


def test_missing_prediction_ids_are_unique_and_event_time_defaults_to_the_call():
    client = Client(UNREACHABLE)
    for _ in range(3):
        client.log_prediction("m", {"x": 1.0})
    records = decoded(batcher().predictions(rows_of(client), [], ClientStats()))
    assert len({r.prediction_id for r in records}) == 3
    assert all(abs(r.event_time - client._buffer.rows[0][4]) < 60 for r in records)


def test_batches_are_cut_by_record_count_and_by_encoded_size():
    client = Client(UNREACHABLE)
    for i in range(10):
        client.log_prediction("m", {"s": "x" * 500}, prediction_id=f"p{i}")
    by_count = batcher(batch_size=4).predictions(rows_of(client), [], ClientStats())
    assert [n for _k, _v, n in by_count] == [4, 4, 2]
    by_size = batcher(max_message_bytes=1_500).predictions(rows_of(client), [], ClientStats())
    assert all(len(v) <= 1_500 for _k, v, _n in by_size) and sum(n for *_, n in by_size) == 10
    stats = ClientStats()
    assert batcher(max_message_bytes=300).predictions(rows_of(client), [], stats) == []
    assert stats.dropped_invalid == 10  # one record alone is larger than a message may be


def test_log_predictions_takes_dataframes_arrays_and_mappings_as_columns():
    client = Client(UNREACHABLE, batch_size=2)
    df = pd.DataFrame({"x": [1.0, np.nan, 3.0], "c": pd.array(["a", None, "b"], dtype="string")})
    assert client.log_predictions("m", df, scores=np.array([0.1, 0.2, 0.3]),
                                  prediction_ids=["a", "b", "c"], slices={"k": ["u", "v", "w"]}) == 3
    assert client.log_predictions("m", np.array([[1.0, 2.0]]), feature_names=["x", "y"]) == 1
    assert client.log_predictions("m", {"x": np.arange(2)}, predicted_labels=[True, False]) == 2
    chunks = list(client._buffer.chunks)
    assert [len(c) for c in chunks] == [2, 1, 1, 2]  # cut into batches of at most batch_size
    records = decoded(batcher().predictions([], chunks, ClientStats()))
    assert [r.prediction_id for r in records[:3]] == ["a", "b", "c"]
    assert records[1].features == {} and records[2].features == {"x": 3.0, "c": "b"}
    assert records[2].score == 0.3 and records[2].slices == {"k": "w"}
    assert records[3].features == {"x": 1.0, "y": 2.0} and records[5].predicted_label is False


def test_malformed_columnar_batches_are_counted_not_raised():
    client = Client(UNREACHABLE)
    assert client.log_predictions("m", {"x": [1.0, 2.0]}, scores=[0.5]) == 0
    assert client.log_predictions("m", np.ones((2, 2))) == 0  # a 2-D array without names
    assert client.log_predictions("m", 42) == 0
    assert client.stats.dropped_invalid == 2  # a batch of unknown size counts 0 records


def test_tabular_rows_of_every_input_kind():
    expected = [{"x": 1.0, "c": "a"}, {"x": 2.0, "c": "b"}]
    assert list(rows(pd.DataFrame(expected))) == expected
    assert list(rows({"x": np.array([1.0, 2.0]), "c": ["a", "b"]})) == expected
    assert list(rows(iter(expected))) == expected
    assert list(rows(np.array([[1.0, 2.0]]), ["x", "y"])) == [{"x": 1.0, "y": 2.0}]
    with pytest.raises(ValueError):
        feature_columns(np.ones((1, 2)), ["only-one"])


def test_sampling_is_deterministic_by_prediction_id_and_applies_to_labels_alike():
    sampler = Sampler({"m": 0.3})
    client = Client(UNREACHABLE)
    for i in range(2_000):
        client.log_prediction("m", {"x": 1.0}, prediction_id=f"p{i}")
        client.log_label("m", f"p{i}", i % 2)
    stats = ClientStats()
    b = batcher(sampler=sampler)
    kept = {r.prediction_id for r in decoded(b.predictions(rows_of(client), [], stats))}
    labelled = {p for _k, v, _n in b.labels(list(client._buffer.labels), stats.labels)
                for p in decode_labels(v).columns.prediction_id}
    assert kept == labelled == {f"p{i}" for i in range(2_000) if sample_point(f"p{i}") < 0.3}
    assert 500 < len(kept) < 700 and stats.sampled_out == stats.labels.sampled_out == 2_000 - len(kept)
    with pytest.raises(ValueError):
        Sampler({"m": 1.5})


def test_pii_features_are_dropped_or_hashed_before_encoding():
    policy = PiiPolicy(drop=["email"], hash=["user_id", "zip"], secret="server-secret")
    client = Client(UNREACHABLE)
    client.log_prediction("m", {"email": "ann@example.com", "user_id": "u-123", "zip": 94103, "x": 2.0},
                          prediction_id="p1")
    client.log_prediction("m", {"user_id": None, "zip": 94103.0, "x": 3.0}, prediction_id="p2")
    messages = batcher(pii=policy).predictions(rows_of(client), [], ClientStats())
    assert all(b"ann@example.com" not in v and b"u-123" not in v for _k, v, _n in messages)
    r1, r2 = decoded(messages)
    assert set(r1.features) == {"user_id", "zip", "x"} and r1.features["x"] == 2.0
    assert r1.features["user_id"] == policy.hash_value("u-123") != PiiPolicy(
        hash=["user_id"], secret="other").hash_value("u-123")
    assert r1.features["zip"] == r2.features["zip"]  # 94103 and 94103.0 are one value
    assert "user_id" not in r2.features  # missing stays missing
    with pytest.raises(ValueError):
        PiiPolicy(hash=["x"])  # no secret


def test_label_contract_round_trip_and_errors():
    cols = LabelColumns("m", ["p1", "p2", "", "p4"], [True, 2.5, 1, math.inf], [1.0, 2.0, 3.0, 4.0])
    decoded_labels = decode_labels(encode_labels(cols))
    assert decoded_labels.columns.prediction_id == ["p1", "p2"]
    assert [(i, e.field) for i, e in decoded_labels.errors] == [(2, "prediction_id"), (3, "label")]
    with pytest.raises(WireError, match="not a label batch"):
        decode_labels(encode_labels(cols).replace(b"labels", b"lebals"))


def test_compression_is_lz4_when_its_codec_is_installed_else_gzip():
    from aiokafka.codec import has_lz4

    assert resolve_compression("auto") == ("lz4" if has_lz4() else "gzip")
    assert resolve_compression(None) is None
    with pytest.raises(ValueError):
        resolve_compression("brotli")


def sample_value(name: str, labels: dict[str, str]) -> float:
    value = REGISTRY.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_counters_are_exported_through_prometheus_client():
    client = Client(UNREACHABLE, max_buffer=2)
    client.start()  # registers the collector; never connects
    gc.collect()  # sums are over live clients: no other client may vanish during the test
    closed = {"stream": "prediction", "reason": "closed"}
    before = sample_value("fleetwatch_sdk_records_dropped_total", closed)
    for i in range(5):
        client.log_prediction("m", {"x": float(i)})
    assert sample_value("fleetwatch_sdk_records_dropped_total",
                        {"stream": "prediction", "reason": "buffer_full"}) >= 3
    client.close(timeout=0.2)
    assert sample_value("fleetwatch_sdk_records_dropped_total", closed) - before == 2
