"""Export client counters through ``prometheus_client`` when the host process has it.

Nothing here imports ``prometheus_client`` unless a client starts and the
package is installed: it is not a dependency of the SDK. One collector is
registered in the default registry and reads every live client's stats at
scrape time, so logging pays nothing for it. Metrics (summed over the
process's clients, ``stream`` is ``prediction`` or ``label``):

- ``fleetwatch_sdk_records_sent_total{stream}``
- ``fleetwatch_sdk_records_sampled_out_total{stream}``
- ``fleetwatch_sdk_records_dropped_total{stream, reason}``
- ``fleetwatch_sdk_buffered_records{stream}`` (gauge: buffered or in flight)
"""

from __future__ import annotations

import weakref
from typing import Any

from sdk.stats import DROP_REASONS, LABELS, PREDICTIONS

_collector: _Collector | None = None


class _Collector:
    def __init__(self) -> None:
        self.clients: weakref.WeakSet[Any] = weakref.WeakSet()

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        sent = CounterMetricFamily("fleetwatch_sdk_records_sent", "Records the broker acknowledged",
                                   labels=["stream"])
        sampled = CounterMetricFamily("fleetwatch_sdk_records_sampled_out",
                                      "Records not sent because of the model's sampling rate",
                                      labels=["stream"])
        dropped = CounterMetricFamily("fleetwatch_sdk_records_dropped", "Records dropped, by reason",
                                      labels=["stream", "reason"])
        buffered = GaugeMetricFamily("fleetwatch_sdk_buffered_records",
                                     "Records buffered or in flight", labels=["stream"])
        snapshots = [client.stats for client in list(self.clients)]
        for name in (PREDICTIONS, LABELS):
            streams = [s.stream(name) for s in snapshots]
            sent.add_metric([name], sum(s.sent for s in streams))
            sampled.add_metric([name], sum(s.sampled_out for s in streams))
            buffered.add_metric([name], sum(s.buffered for s in streams))
            for reason in DROP_REASONS:
                dropped.add_metric([name, reason], sum(s.dropped_by_reason()[reason] for s in streams))
        yield from (sent, sampled, dropped, buffered)


def export(client: Any) -> bool:
    """Include ``client``'s stats in the default Prometheus registry.

    Returns
    -------
    bool
        False if ``prometheus_client`` is not installed (nothing is exported).
    """
    global _collector
    try:
        from prometheus_client import REGISTRY
    except ImportError:
        return False
    if _collector is None:
        _collector = _Collector()
        REGISTRY.register(_collector)
    _collector.clients.add(client)
    return True
