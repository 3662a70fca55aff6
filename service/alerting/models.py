"""The typed records of alerting as the API answers them: an alert, its evidence, an incident
(and the incident as stored, which notifications name).

The alert policy (:mod:`service.alerting.policy`) writes an alert as one JSON body plus the
user's actions; :class:`Alert` names and types every field of what
:class:`~service.alerting.store.AlertStore` reads back, so the API's schema documents it.
Fields added later by a newer writer pass through (``extra="allow"``) rather than being
dropped from an answer.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

AlertState = Literal["firing", "acknowledged", "resolved"]
SeverityName = Literal["info", "warning", "critical"]


class Evidence(BaseModel):
    """One breaching window of an alert's episode."""

    model_config = ConfigDict(extra="allow")

    window_start: int = Field(..., description="Start of the breaching window, Unix seconds")
    effect_size: float | None = Field(None, description="The check's effect in that window")
    p_value: float | None = Field(None, description="Its p-value (None: a check without one)")


class Alert(BaseModel):
    """One alert: an episode of one (model, feature, check) series, from its first breach."""

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
    fired_window_start: int = Field(..., description="Window at which persistence fired it")
    last_window_start: int
    resolved_window_start: int | None = None
    effect_size: float | None = Field(None, description="Effect in the last breaching window")
    floor: float | None = Field(None, description="The effect floor it cleared")
    p_value: float | None = None
    evidence_count: int
    evidence: list[Evidence] = Field(default_factory=list, description="The latest breaching windows")
    inhibited_by: list[str] = Field(default_factory=list, description="Data-quality alerts inhibiting it")
    silenced_by: list[str] = Field(default_factory=list, description="Silences matching it")
    notify: bool = Field(..., description="Neither inhibited nor silenced")
    seq: int | None = Field(None, description="The model's policy sequence number when written")
    created_at: float = Field(..., description="Unix seconds")
    updated_at: float | None = Field(None, description="Unix seconds")
    acked_by: str | None = None
    acked_at: str | None = Field(None, description="Unix seconds (as text)")
    ack_comment: str | None = None
    resolved_by: str | None = None
    resolved_at: str | None = Field(None, description="Unix seconds (as text)")
    resolve_comment: str | None = None


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
