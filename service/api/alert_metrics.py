"""Alert gauges for /metrics, read from Redis at scrape time (the API process serves them).

Label budget: ``fleetwatch_alerts_open`` has state x severity (2 x 3 series);
``fleetwatch_alert_effect_size`` has one series per open alert's (model,
feature, check) -- features with a firing alert only -- at most
:data:`MAX_EFFECT_SERIES`, the largest effects first; the rest are counted in
``fleetwatch_alert_effect_series_dropped``.
"""

from __future__ import annotations

from detectors.policy.severity import SEVERITIES
from service.alerting.store import AlertStore
from service.metrics import ALERT_EFFECT, ALERTS_OPEN, EFFECT_SERIES_DROPPED, MAX_EFFECT_SERIES


async def refresh(alerts: AlertStore) -> None:
    """Set the alert gauges from the open alerts in Redis."""
    open_alerts = await alerts.open_alerts()
    counts = {(state, sev): 0 for state in ("firing", "acknowledged") for sev in SEVERITIES}
    for a in open_alerts:
        counts[(a.state, a.severity)] += 1
    for (state, sev), n in counts.items():
        ALERTS_OPEN.labels(state=state, severity=sev).set(n)
    ranked = sorted(open_alerts, key=lambda a: -abs(a.effect_size or 0.0))
    ALERT_EFFECT.clear()
    for a in ranked[:MAX_EFFECT_SERIES]:
        ALERT_EFFECT.labels(model=a.model_id, feature=a.feature, check=a.check).set(
            a.effect_size or 0.0)
    EFFECT_SERIES_DROPPED.set(max(len(ranked) - MAX_EFFECT_SERIES, 0))
