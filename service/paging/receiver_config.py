"""Receivers: where incidents are paged, which alerts go there, and how often.

A *receiver* is one destination of notifications: a generic signed JSON
``webhook``, a ``slack`` incoming webhook, a ``pagerduty`` Events API v2
integration, an ``alertmanager``-format webhook, an ``opsgenie`` Alert API
integration or a Microsoft ``teams`` Workflows webhook (one module each in
:mod:`service.paging.kinds`, which also says which credentials a kind takes).
It receives the notifiable alerts (``notify: true``:
neither silenced nor inhibited) that satisfy **all** of its matchers, grouped
by incident, with Alertmanager's timing [1]_:

- ``group_wait_seconds`` (default 30 s): how long to wait after the first
  alert of an incident before the first notification, so alerts of one
  incident that arrive together go out in one;
- ``group_interval_seconds`` (default 5 min): the least time between two
  notifications of one incident (an update: alerts added or resolved; the
  resolve itself);
- ``repeat_interval_seconds`` (default 4 h): how often a still-firing,
  unacknowledged incident is notified again;
- ``max_per_minute`` (default 60): deliveries to the receiver in any minute;
  more are deferred, never dropped.

The labels a matcher sees are the alert's ``routing`` labels (from the model's
registration) overlaid with ``model``, ``feature``, ``check``, ``severity`` and
``owner``; an absent label is ``""``. The comparison is that of silences
(:class:`detectors.policy.silence.Matcher`: equality or an anchored regular
expression, optionally negated). A receiver without matchers receives every
notifiable alert.

Pure code: no clock, no network. The URL's scheme and form are checked here;
whether its host is a safe destination needs DNS and is checked by
``service.paging.ssrf`` (when the receiver is created and again at each delivery).

References
----------
.. [1] Prometheus Authors, "Alertmanager configuration: <route>" (group_wait,
   group_interval, repeat_interval),
   https://prometheus.io/docs/alerting/latest/configuration/#route
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, StringConstraints, ValidationInfo, field_validator

from detectors.policy.silence import MAX_MATCHERS, Matcher
from detectors.strict import LAX, StrictModel
from service.alerting.models import Alert
from service.paging.kinds import KINDS, ReceiverKind
from service.paging.ssrf import http_host

BUILTIN_LABELS = ("model", "feature", "check", "severity", "owner")

LabelName = Annotated[str, StringConstraints(min_length=1, max_length=128)]


class ReceiverMatcher(Matcher):
    """A silence :class:`~detectors.policy.silence.Matcher` on any alert label.

    ``name`` is one of ``model``, ``feature``, ``check``, ``severity``,
    ``owner`` or a routing label of the model (``team``, ``channel``, ...).

    Examples
    --------
    >>> ReceiverMatcher(name="team", value="pay.*", regex=True).matches_value("payments")
    True
    >>> ReceiverMatcher(name="severity", value="critical", equal=False).matches_value("critical")
    False
    """

    name: LabelName = Field(..., description="Alert label: model, feature, check, severity, owner "
                                             "or a routing label")


def alert_labels(alert: Alert) -> dict[str, str]:
    """The labels receivers match on: routing labels overlaid with the built-in ones.

    Parameters
    ----------
    alert : Alert
        An alert as ``service.alerting.store.AlertStore`` returns it.

    Returns
    -------
    dict of str to str
        ``model``, ``feature``, ``check``, ``severity``, ``owner`` (None is
        ``""``) and every routing label whose name is not one of those.

    Examples
    --------
    >>> labels = alert_labels(Alert.model_construct(model_id="fraud", feature="amount", check="psi",
    ...                                             severity="critical", routing={"team": "pay"}))
    >>> sorted(labels.items())  # doctest: +NORMALIZE_WHITESPACE
    [('check', 'psi'), ('feature', 'amount'), ('model', 'fraud'), ('owner', ''),
     ('severity', 'critical'), ('team', 'pay')]
    """
    labels = {str(k): str(v) for k, v in alert.routing.items()}
    labels.update({"model": alert.model_id, "feature": alert.feature, "check": alert.check,
                   "severity": alert.severity, "owner": alert.owner or ""})
    return labels


def _check_url(url: str) -> str:
    http_host(url)  # raises UnsafeUrl, a ValueError: answered 422 naming the field
    return url


class ReceiverSpec(StrictModel):
    """A receiver as a user requests it (``POST /v1/receivers``).

    Parameters
    ----------
    name : str
        1 to 256 characters, for people.
    kind : {"webhook", "slack", "pagerduty", "alertmanager", "opsgenie", "teams"}
        The destination's kind (:mod:`service.paging.kinds`).
    url : str, optional
        http or https. Required, except for ``pagerduty`` (default: the Events
        API v2 endpoint) and ``opsgenie`` (default: the Alert API v2 endpoint).
    routing_key : str, optional
        The PagerDuty integration key; required for ``pagerduty``, refused for
        other kinds. Stored, never returned.
    secret : str, optional
        HMAC-SHA256 signing secret, 16 to 256 characters; required for
        ``webhook``, optional for ``alertmanager``, refused for ``slack`` and
        ``pagerduty``, ``opsgenie`` and ``teams`` (their URL or key is the
        credential). Stored, never returned.
    api_key : str, optional
        The key of an Opsgenie API integration; required for ``opsgenie``,
        refused for other kinds. Stored, never returned.
    matchers : list of ReceiverMatcher
        0 to 16; an alert goes to the receiver when it satisfies all of them.
    group_wait_seconds, group_interval_seconds, repeat_interval_seconds : float
        Alertmanager's timing (module docstring); defaults 30, 300, 14 400;
        the repeat interval is at least the group interval.
    max_per_minute : int
        Deliveries per minute to this receiver, 1 to 10 000 (default 60).

    Raises
    ------
    pydantic.ValidationError
        Naming the field: ``url`` (missing, not http(s), no host),
        ``routing_key``, ``api_key`` and ``secret`` (missing or not allowed for
        the kind),
        ``repeat_interval_seconds`` (below the group interval), a matcher's
        ``value`` (bad regular expression), ...

    Examples
    --------
    >>> spec = ReceiverSpec(name="payments on-call", kind="pagerduty", routing_key="R0123",
    ...                     matchers=[{"name": "team", "value": "payments"}])
    >>> spec.url, spec.group_wait_seconds, spec.repeat_interval_seconds
    ('https://events.pagerduty.com/v2/enqueue', 30.0, 14400.0)
    >>> ReceiverSpec(name="hook", kind="webhook", url="ftp://example.com", secret="s" * 16)
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for ReceiverSpec
    url
      Value error, only http and https URLs are allowed ...
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "name": "payments on-call", "kind": "pagerduty", "routing_key": "<integration key>",
        "matchers": [{"name": "team", "value": "payments"},
                     {"name": "severity", "value": "critical"}],
        "group_wait_seconds": 30, "group_interval_seconds": 300,
        "repeat_interval_seconds": 14400, "max_per_minute": 60}]})

    name: str = Field(..., min_length=1, max_length=256, description="Receiver name, for people")
    kind: ReceiverKind = Field(..., description="webhook, slack, pagerduty, alertmanager, opsgenie or teams")
    url: str | None = Field(None, min_length=1, max_length=2048, validate_default=True,
                            description="http(s) URL; pagerduty and opsgenie default to their API's")
    routing_key: str | None = Field(None, min_length=1, max_length=128, validate_default=True,
                                    description="PagerDuty integration key (pagerduty only; never returned)")
    secret: str | None = Field(None, min_length=16, max_length=256, validate_default=True,
                               description="HMAC-SHA256 signing secret (webhook: required; "
                                           "alertmanager: optional; never returned)")
    api_key: str | None = Field(None, min_length=1, max_length=128, validate_default=True,
                                description="Opsgenie API integration key (opsgenie only; never returned)")
    matchers: tuple[ReceiverMatcher, ...] = Field(
        (), max_length=MAX_MATCHERS, **LAX, description="All must match; none: every notifiable alert")
    group_wait_seconds: float = Field(30.0, ge=0, le=86_400,
                                      description="Wait after an incident's first alert before notifying")
    group_interval_seconds: float = Field(300.0, gt=0, le=7 * 86_400,
                                          description="Least time between notifications of an incident")
    repeat_interval_seconds: float = Field(
        14_400.0, gt=0, le=30 * 86_400, validate_default=True,
        description="Re-notify a firing, unacknowledged incident this often")
    max_per_minute: int = Field(60, ge=1, le=10_000, description="Deliveries per minute; more are deferred")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None, info: ValidationInfo) -> str | None:
        kind = info.data.get("kind")
        if v is None:
            if kind is None:
                return None  # the kind itself is invalid and reported
            default = KINDS[kind].default_url
            if default is None:
                raise ValueError(f"required for {kind} receivers")
            return default
        return _check_url(v)

    @field_validator("routing_key", "secret", "api_key")
    @classmethod
    def _credential(cls, v: str | None, info: ValidationInfo) -> str | None:
        """Each kind's credentials (``Kind.needs``): required ones present, others absent."""
        kind, name = info.data.get("kind"), info.field_name
        if kind is None:
            return v
        need = KINDS[kind].needs.get(name)
        if need == "required" and v is None:
            why = " (deliveries are signed with it)" if name == "secret" else ""
            raise ValueError(f"required for {kind} receivers{why}")
        if need is None and v is not None:
            if name == "secret":
                raise ValueError(f"{kind} receivers are not signed; remove the secret")
            owners = " and ".join(k for k, spec in KINDS.items() if name in spec.needs)
            what = {"routing_key": "a routing key", "api_key": "an API key"}[name]
            raise ValueError(f"only {owners} receivers take {what}")
        return v

    @field_validator("repeat_interval_seconds")
    @classmethod
    def _repeat_after_group(cls, v: float, info: ValidationInfo) -> float:
        group = info.data.get("group_interval_seconds")
        if group is not None and v < group:
            raise ValueError(f"must be at least group_interval_seconds ({group})")
        return v


class Receiver(ReceiverSpec):
    """A stored receiver: the request with an id and a creation time (Unix seconds).

    Examples
    --------
    >>> r = Receiver(id="r1", created_at=0, name="sev1", kind="slack",
    ...              url="https://hooks.slack.com/services/T/B/X",
    ...              matchers=[{"name": "severity", "value": "critical"},
    ...                        {"name": "team", "value": "pay.*", "regex": True}])
    >>> def alert(severity):
    ...     return Alert.model_construct(model_id="fraud", feature="amount", check="psi",
    ...                                  severity=severity, routing={"team": "payments"})
    >>> r.matches(alert("critical")), r.matches(alert("warning"))
    (True, False)
    """

    id: str = Field(..., min_length=1, max_length=64, description="Receiver id")
    created_at: float = Field(..., description="Creation time, Unix seconds")

    def matches(self, alert: Alert) -> bool:
        """Whether the alert's labels (:func:`alert_labels`) satisfy every matcher."""
        labels = alert_labels(alert)
        return all(m.matches_value(labels.get(m.name)) for m in self.matchers)
