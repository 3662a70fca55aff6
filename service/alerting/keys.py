"""The Redis keys of alerting: every key this package writes.

Keys (model keys hash-tagged ``{m}``):

===============================  ===================================================
``fw:{m}:series``                HASH ``feature\\0check`` -> JSON series: ``settled``
                                 (window start up to which outcomes are folded and
                                 forgotten) and ``o`` (recent outcomes)
``fw:{m}:alerting``              HASH ``seq``: windows recorded (orders the views)
``fw:{m}:dq``                    HASH alert id -> JSON [feature, lo, hi]: the event-time
                                 span of each recent data-quality alert (hi null
                                 while it fires), for inhibition
``fw:{m}:gate:{member}``         JSON the FDR gate's answer for one window (batch level,
                                 granted, reward, per test discovered / breach), kept
                                 8 days for the dashboard's window view
``{fw}:alert:{id}``              HASH ``body`` (JSON alert written by the policy,
                                 compare-and-set on the model's ``seq`` so a stale
                                 view never overwrites), ``created_at``,
                                 ``incident_id``, and the user's acknowledgement and
                                 resolution fields
``{fw}:alerts`` / ``{fw}:alerts:{m}`` ZSET alert ids by creation time
``{fw}:incident:{id}``           JSON incident (key, source, created_at)
``{fw}:incident:{id}:alerts``    SET every alert of the incident
``{fw}:incident:spans:{key}``    HASH incident id -> ``lo:hi``: the event-time span
                                 (seconds) of each recent incident of a group key
``{fw}:incidents``               ZSET incident ids by creation time
``{fw}:alert-events``            STREAM alert lifecycle events for notifiers
``{fw}:open``                    SET alerts not resolved
``{fw}:silences``                HASH silence id -> JSON silence (:mod:`service.alerting.silences`)
``{fw}:fdr:{epoch}:{name}``      the online FDR gate's counters of one epoch (:mod:`service.alerting.fdr`)
``{fw}:fdr:demand``              HASH model -> ``"tests:at"``: tests per slot of its latest gated
                                 window, and when (Unix s)
``{fw}:fdr-perf:{epoch}:{name}``, ``{fw}:fdr-perf:demand``  the same for the label-joined
                                 performance tests, a family gated apart (its own share of q)
``{fw}:open:alerts``             HASH alert id -> JSON :class:`~service.alerting.store.OpenAlert` (model,
                                 severity, incident) of every alert in ``{fw}:open``,
                                 written with it: the fleet overview's health of every
                                 model in one read
===============================  ===================================================
"""

from __future__ import annotations

from service.profiles.keys import GLOBAL

ALERTS = "{fw}:alerts"
INCIDENTS = "{fw}:incidents"
OPEN = "{fw}:open"  # SET of alert ids firing or acknowledged (for /metrics)
OPEN_INDEX = "{fw}:open:alerts"  # HASH the same ids -> OpenAlert JSON (the fleet overview)
#: Alert lifecycle events for notifiers: ``kind`` (fired, resolved, acknowledged),
#: ``alert_id``, ``incident_id``. Capped: a notifier down for long loses the oldest.
EVENTS = "{fw}:alert-events"
SILENCES = "{fw}:silences"
#: The SCAN pattern of the FDR gate's per-epoch ``used`` counters.
FDR_USED_PATTERN = "{fw}:fdr:*:used"
#: The FDR gate's families (:data:`service.alerting.fdr.FEATURES`, ``PERFORMANCE``) -> key prefix.
FDR_FAMILY_PREFIX = {"features": "fdr", "performance": "fdr-perf"}


def series_key(m: str) -> str:
    return f"fw:{{{m}}}:series"


def alerting_key(m: str) -> str:
    """HASH ``seq``: the model's windows recorded by the policy (orders its views)."""
    return f"fw:{{{m}}}:alerting"


def looks_key(m: str) -> str:
    """HASH alert id -> JSON [member, window start] of the alerts looks at the model's open
    windows fired, until the alert policy applies those windows."""
    return f"fw:{{{m}}}:looks"


def quality_spans_key(m: str) -> str:
    """HASH alert id -> JSON [feature, lo, hi] of the model's recent data-quality alerts."""
    return f"fw:{{{m}}}:dq"


def gate_key(m: str, member: str) -> str:
    return f"fw:{{{m}}}:gate:{member}"


def alert_key(alert_id: str) -> str:
    return f"{GLOBAL}alert:{alert_id}"


def model_alerts_key(m: str) -> str:
    return f"{GLOBAL}alerts:{m}"


def incident_key(incident_id: str) -> str:
    return f"{GLOBAL}incident:{incident_id}"


def incident_spans_key(group: str) -> str:
    return f"{GLOBAL}incident:spans:{group}"


def fdr_key(epoch: int, name: str, family: str = "features") -> str:
    """One counter of the FDR gate's ``epoch`` (:mod:`service.alerting.fdr`) for one
    family of tests.

    Examples
    --------
    >>> fdr_key(3, "used"), fdr_key(3, "used", "performance")
    ('{fw}:fdr:3:used', '{fw}:fdr-perf:3:used')
    """
    return f"{GLOBAL}{FDR_FAMILY_PREFIX[family]}:{epoch}:{name}"


def fdr_demand_key(family: str = "features") -> str:
    """HASH model -> tests per slot of its latest window gated in ``family``.

    Examples
    --------
    >>> fdr_demand_key(), fdr_demand_key("performance")
    ('{fw}:fdr:demand', '{fw}:fdr-perf:demand')
    """
    return f"{GLOBAL}{FDR_FAMILY_PREFIX[family]}:demand"
