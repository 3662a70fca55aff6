"""SDK behaviour that needs no broker: footprint, never raising, drop counting."""

from __future__ import annotations

import subprocess
import sys

from sdk import Client


def test_importing_sdk_does_not_import_server_dependencies():
    code = ("import sys, sdk; bad = [m for m in ('fastapi', 'redis', 'datasketches', 'numpy') "
            "if m in sys.modules]; print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_log_prediction_never_raises_and_counts_drops_when_the_buffer_is_full():
    client = Client("127.0.0.1:1", max_buffer=10)  # never started: nothing is sent
    results = [client.log_prediction("m", {"x": i}) for i in range(15)]
    assert results == [True] * 10 + [False] * 5
    assert client.stats.accepted == 10 and client.stats.dropped_buffer_full == 5


def test_invalid_records_are_dropped_and_counted_not_raised():
    client = Client("127.0.0.1:1")
    assert client.log_prediction("m", {"x": object()}) is True  # validated in the background
    assert client.log_prediction("m", None, event_time="now") is True
    batches = client._core._take_batches()
    assert batches == {} and client.stats.dropped_invalid == 2
