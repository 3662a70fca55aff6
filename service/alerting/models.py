"""The typed records of alerting: an alert, its evidence, an incident (and the incident as
stored, which notifications name).

The alert policy (:mod:`service.alerting.policy`) builds each alert as an :class:`Alert`;
:class:`~service.alerting.store.AlertStore` writes it as one JSON body (:meth:`Alert.body`,
the user's actions apart) and validates what it reads back, so the notifier, the API, the
dashboard and the CLI read fields, not dictionary keys, and the API's schema documents
every one. Fields added later by a newer writer pass through (``extra="allow"``) rather
than being dropped from an answer; the order of the fields is the order of the stored body.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from detectors.policy.severity import highest

AlertState = Literal["firing", "acknowledged", "resolved"]
SeverityName = Literal["info", "warning", "critical"]
#: What a user's acknowledgement or resolution records: fields of the alert's hash, not of its body.
USER_FIELDS = ("acked_by", "acked_at", "ack_comment", "resolved_by", "resolved_at", "resolve_comment")


class Evidence(BaseModel):
    """One breaching window of an alert's episode."""

    model_config = ConfigDict(extra="allow")

    window_start: int = Field(..., description="Start of the breaching window, Unix seconds")
    effect_size: float | None = Field(None, description="The check's effect in that window")
    p_value: float | None = Field(None, description="Its p-value (None: a check without one)")


class Alert(BaseModel):
    """One alert: an episode of one (model, feature, check) series, from its first breach.

    Examples
    --------
    >>> a = Alert.model_validate_json(
    ...     '{"id": "a1", "model_id": "fraud", "model_version": "3", "feature": "amount",'
    ...     ' "check": "psi", "state": "firing", "severity": "warning", "tier": 2,'
    ...     ' "group_key": "feature:amount", "window_start": 0, "window_end": 300,'
    ...     ' "fired_window_start": 300, "last_window_start": 300, "evidence_count": 2,'
    ...     ' "notify": true, "created_at": 600.0}')
    >>> a.state, a.evidence, a.incident_id
    ('firing', [], None)
    """

    model_config = ConfigDict(extra="allow")

    id: str
    model_id: str
    model_version: str = Field(..., description="Version of the first breaching window")
    feature: str = Field(..., description="Feature, or a model-level name (``__score__``, ...)")
    check: str
    state: AlertState = Field(..., description="firing, acknowledged or resolved")
    severity: SeverityName
    owner: str | None = None
    tier: int = Field(..., description="The model's tier (1: business critical)")
    routing: dict[str, str] = Field(default_factory=dict, description="The model's routing labels")
    group_key: str = Field(..., description="Root-cause key of its incident")
    source: str | None = Field(None, description="Declared upstream source of the feature")
    incident_id: str | None = None
    window_start: int = Field(..., description="First breaching window's start, Unix seconds")
    window_end: int
    window_start_local: str | None = Field(
        None, description="First breaching window's start in the model's time zone, ISO 8601")
    fired_window_start: int = Field(..., description="Window at which persistence fired it")
    fired_at: float | None = Field(
        None, description="Event time (Unix seconds) at which the evidence that fired it was "
                          "complete, when a look at the open window fired_window_start saw it "
                          "before the window closed (the latest record that look read; "
                          "docs/alerting.md, 'Looks inside an open window'); None: at the end of "
                          "fired_window_start, whose close fired it")
    last_window_start: int
    resolved_window_start: int | None = None
    effect_size: float | None = Field(None, description="Effect in the last breaching window")
    floor: float | None = Field(None, description="The effect floor it cleared")
    p_value: float | None = None
    evidence_count: int
    evidence: list[Evidence] = Field(default_factory=list, description="The latest breaching windows")
    inhibited_by: list[str] = Field(default_factory=list, description="Data-quality alerts inhibiting it")
    seq: int | None = Field(None, description="The model's policy sequence number when written")
    created_at: float = Field(..., description="Unix seconds")
    updated_at: float | None = Field(None, description="Unix seconds")
    silenced_by: list[str] = Field(default_factory=list, description="Silences matching it")
    notify: bool = Field(..., description="Neither inhibited nor silenced")
    acked_by: str | None = None
    acked_at: str | None = Field(None, description="Unix seconds (as text)")
    ack_comment: str | None = None
    resolved_by: str | None = None
    resolved_at: str | None = Field(None, description="Unix seconds (as text)")
    resolve_comment: str | None = None

    def body(self) -> dict[str, Any]:
        """The alert's stored JSON body: every field but the user's actions
        (:data:`USER_FIELDS`) and ``fired_at``, fields of the alert's hash (the look that
        fired an alert sets ``fired_at`` once; the window's close rewrites the body)."""
        return self.model_dump(mode="json", exclude={*USER_FIELDS, "fired_at"})

    @property
    def fired_event_time(self) -> float:
        """Event time (Unix seconds) at which it fired: :attr:`fired_at`, else the end of the
        window whose close fired it (``fired_window_start`` plus the window's length)."""
        if self.fired_at is not None:
            return self.fired_at
        return self.fired_window_start + self.window_end - self.window_start

    def open(self) -> bool:
        """Not resolved (firing or acknowledged)."""
        return self.state != "resolved"


class IncidentRecord(BaseModel):
    """An incident as the policy stores it (its alerts apart): what a notification names."""

    model_config = ConfigDict(extra="allow")

    id: str
    group_key: str
    source: str | None = None
    title: str | None = None
    created_at: float = Field(..., description="Unix seconds")


class Incident(IncidentRecord):
    """Alerts grouped by root cause, with the state, severity and scope derived from them."""

    state: Literal["open", "resolved"]
    severity: SeverityName = Field(..., description="Highest of its open alerts (of all, once resolved)")
    models: list[str]
    features: list[str]
    checks: list[str]
    first_window_start: int | None = None
    alert_count: int
    alerts: list[Alert]

    @classmethod
    def of(cls, record: IncidentRecord, alerts: list[Alert]) -> Incident:
        """The incident ``record`` with its ``alerts`` and what they make of it: open while
        one of them is, as severe as the most severe open one (of all, once resolved)."""
        open_ = [a for a in alerts if a.open()]
        return cls.model_validate({
            **record.model_dump(exclude_unset=True),
            "state": "open" if open_ else "resolved",
            "severity": highest([a.severity for a in open_ or alerts]),
            "models": sorted({a.model_id for a in alerts}),
            "features": sorted({a.feature for a in alerts}),
            "checks": sorted({a.check for a in alerts}),
            "first_window_start": min((a.window_start for a in alerts), default=None),
            "alert_count": len(alerts),
            "alerts": alerts,
        })

    def record(self) -> IncidentRecord:
        """The incident as stored, its derived fields and alerts apart."""
        derived = set(Incident.model_fields) - set(IncidentRecord.model_fields)
        return IncidentRecord.model_validate(self.model_dump(exclude=derived, exclude_unset=True))
