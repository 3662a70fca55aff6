"""Silences: mute alerts whose labels match, for a bounded time (as Alertmanager's).

A *silence* is a set of label :class:`Matcher`\\ s, a time interval
``[starts_at, ends_at)``, who created it and why. While it is *active* every
alert whose labels satisfy **all** of its matchers is silenced: the alert is
still computed and stored, it is only not notified. The labels an alert
carries here are ``model``, ``feature``, ``check``, ``severity`` and
``owner``; an absent label (or ``None``) has the value ``""``, as in
Prometheus: ``owner != "payments"`` matches alerts without an owner, and
``feature !~ ".+"`` matches window-level checks (whose feature is ``""``).

The semantics are Alertmanager's [1]_:

- a matcher compares one label with a value, by equality or by a regular
  expression that must match the whole value (anchored), optionally negated;
  the expressions are RE2's [2]_ (the syntax of Go's ``regexp``, which
  Alertmanager uses), matched in time linear in the label value whatever the
  pattern: no backtracking, so no pattern such as ``(a+)+$`` can stall the
  detector. Lookarounds and backreferences, which need backtracking, are
  refused;
- a silence is *pending* before ``starts_at``, *active* from ``starts_at``
  (inclusive) to ``ends_at`` (exclusive), *expired* from ``ends_at`` on;
- a new silence starting in the past starts now; one that would end at or
  before its start is refused;
- at least one matcher must not match the empty string, so a silence can
  never mute every alert of the fleet;
- expiring (deleting) a silence ends it now; it stays visible as expired.

Pure code: no clock (``now`` is always an argument), no I/O.

References
----------
.. [1] Prometheus Authors, "Alertmanager: Silences",
   https://prometheus.io/docs/alerting/latest/alertmanager/#silences
.. [2] R. Cox, "Regular Expression Matching Can Be Simple And Fast", 2007,
   https://swtch.com/~rsc/regexp/regexp1.html; RE2 syntax:
   https://github.com/google/re2/wiki/Syntax
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

import re2
from pydantic import ConfigDict, Field, PrivateAttr, ValidationInfo, field_validator

from detectors.strict import LAX, StrictModel

LabelName = Literal["model", "feature", "check", "severity", "owner"]
SilenceState = Literal["pending", "active", "expired"]
MAX_MATCHERS = 16
#: Longest matcher value (label value or regular expression), characters.
MAX_VALUE_LENGTH = 256
#: Memory budget of one compiled expression (RE2 ``max_mem``: program and DFA cache), bytes;
#: a pattern whose program does not fit is refused. 256 characters need far less.
REGEX_MAX_MEM = 1 << 20
#: Validation context key of values read back from storage: a regular expression RE2 refuses
#: (stored by a release that used another engine) is then kept as a matcher that matches
#: nothing (:attr:`Matcher.usable` false) instead of making the whole record unreadable.
STORED_CONTEXT = "stored"
#: Distinct compiled expressions kept (stored silences and receivers are parsed on every read).
REGEX_CACHE_SIZE = 1024


@functools.lru_cache(maxsize=REGEX_CACHE_SIZE)
def compile_regex(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (cached: each distinct pattern is compiled once).

    Parameters
    ----------
    pattern : str
        An RE2 regular expression [2]_.

    Returns
    -------
    re2._Regexp
        Its ``fullmatch`` runs in time linear in the subject's length.

    Raises
    ------
    ValueError
        The pattern is invalid, uses a construct RE2 does not support
        (lookaround, backreference) or does not fit :data:`REGEX_MAX_MEM`;
        the message says which.

    Examples
    --------
    >>> compile_regex("psi|ks").fullmatch("ks") is not None
    True
    >>> compile_regex("pay(?!ments)")
    Traceback (most recent call last):
    ...
    ValueError: invalid regular expression (RE2 syntax): invalid perl operator: (?!
    """
    options = re2.Options()
    options.log_errors = False
    options.max_mem = REGEX_MAX_MEM
    try:
        return re2.compile(pattern, options=options)
    except re2.error as exc:
        why = exc.args[0] if exc.args else "refused"
        why = why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why)
        raise ValueError(f"invalid regular expression (RE2 syntax): {why}") from None


def as_utc(t: datetime | float) -> datetime:
    """A timezone-aware UTC datetime from a datetime or Unix seconds.

    A naive datetime is taken to be UTC; an aware one is converted.

    Examples
    --------
    >>> as_utc(0.0).isoformat()
    '1970-01-01T00:00:00+00:00'
    >>> as_utc(datetime(2024, 5, 1, 12)).isoformat()
    '2024-05-01T12:00:00+00:00'
    """
    if isinstance(t, datetime):
        return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    return datetime.fromtimestamp(t, UTC)


def _utc_or_none(v: datetime | None) -> datetime | None:
    return None if v is None else as_utc(v)


def _after_start(v: datetime, info: ValidationInfo) -> datetime:
    v, start = as_utc(v), info.data.get("starts_at")
    if start is not None and v <= start:
        raise ValueError(f"must be after starts_at ({start.isoformat()})")
    return v


def _not_before_start(v: datetime, info: ValidationInfo) -> datetime:
    v, start = as_utc(v), info.data.get("starts_at")
    if start is not None and v < start:
        raise ValueError(f"must not be before starts_at ({start.isoformat()})")
    return v


def _not_all_match_empty(matchers: tuple[Matcher, ...]) -> tuple[Matcher, ...]:
    if all(m.matches_value("") for m in matchers):
        raise ValueError("at least one matcher must not match the empty string "
                         "(a silence must not mute every alert)")
    return matchers


class Matcher(StrictModel):
    """One label condition of a silence.

    Parameters
    ----------
    name : {"model", "feature", "check", "severity", "owner"}
        The alert label compared.
    value : str
        1 to 256 characters: the value, or the regular expression (RE2
        syntax [2]_) when ``regex`` is true.
    regex : bool, default False
        Compare with the RE2 expression's ``fullmatch`` (it must match the
        whole label value, as Alertmanager's anchored regexes) instead of
        equality. Time linear in the label value's length.
    equal : bool, default True
        False negates the comparison (Alertmanager's ``isEqual``: ``!=`` and
        ``!~``).

    Raises
    ------
    pydantic.ValidationError
        Unknown ``name``, ``value`` empty or too long, or (naming ``value``)
        not a valid RE2 expression when ``regex`` is true
        (:func:`compile_regex`), except when validated with the context
        ``{STORED_CONTEXT: True}`` (read back from storage): such a matcher
        matches nothing.

    Notes
    -----
    ``regex`` and ``equal`` are declared before ``value`` so that ``value`` is
    validated knowing whether it is a regular expression, and a bad one is
    reported on the ``value`` field.

    Examples
    --------
    >>> Matcher(name="check", value="psi|ks", regex=True).matches_value("ks")
    True
    >>> Matcher(name="check", value="ps", regex=True).matches_value("psi")  # anchored
    False
    >>> Matcher(name="owner", value="payments", equal=False).matches_value(None)
    True
    >>> Matcher(name="model", value="(a+)+$", regex=True).matches_value("a" * 256 + "!")  # linear
    False
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: LabelName = Field(..., description="Alert label: model, feature, check, severity or owner")
    regex: bool = Field(False, description="value is a regular expression matching the whole label")
    equal: bool = Field(True, description="False negates the match (!= or !~)")
    value: str = Field(..., min_length=1, max_length=MAX_VALUE_LENGTH,
                       description="Label value or regular expression (RE2 syntax, anchored)")

    _pattern: Any = PrivateAttr(None)

    @field_validator("value")
    @classmethod
    def _valid_regex(cls, v: str, info: ValidationInfo) -> str:
        if info.data.get("regex"):
            try:
                compile_regex(v)
            except ValueError:
                if not (info.context or {}).get(STORED_CONTEXT):
                    raise
        return v

    def model_post_init(self, _context: object) -> None:
        if self.regex:
            try:
                self._pattern = compile_regex(self.value)
            except ValueError:  # read back from storage (STORED_CONTEXT): matches nothing
                self._pattern = None

    @property
    def usable(self) -> bool:
        """False for a stored regular expression RE2 refuses (it matches nothing).

        Examples
        --------
        >>> m = Matcher.model_validate({"name": "model", "value": "a(?=b)", "regex": True},
        ...                            context={STORED_CONTEXT: True})
        >>> m.usable, m.matches_value("ab"), m.model_copy(update={"equal": False}).matches_value("x")
        (False, False, False)
        """
        return not self.regex or self._pattern is not None

    def matches_value(self, value: str | None) -> bool:
        """Whether one label value satisfies this matcher (None is ``""``).

        Examples
        --------
        >>> Matcher(name="feature", value="amount").matches_value("amount")
        True
        >>> Matcher(name="feature", value=".+", regex=True, equal=False).matches_value(None)
        True
        """
        if not self.usable:
            return False  # whatever ``equal`` says: a negated unusable matcher must not match all
        v = "" if value is None else value
        hit = self._pattern.fullmatch(v) is not None if self._pattern is not None else v == self.value
        return hit == self.equal


class SilenceSpec(StrictModel):
    """A silence as a user requests it.

    Parameters
    ----------
    matchers : list of Matcher
        1 to 16; an alert is silenced when it satisfies all of them. At least
        one must not match the empty string.
    starts_at : datetime, optional
        Start; None means now (filled in by :func:`new_silence`). Naive
        datetimes are UTC.
    ends_at : datetime
        End (exclusive); must be after ``starts_at``. Naive datetimes are UTC.
    created_by : str
        Who created it, 1 to 256 characters.
    comment : str
        Why, 1 to 2048 characters.

    Raises
    ------
    pydantic.ValidationError
        Naming the field: ``matchers`` (none, more than 16, or all matching the
        empty string), ``ends_at`` (not after ``starts_at``), and so on.

    Examples
    --------
    >>> spec = SilenceSpec(matchers=[{"name": "model", "value": "fraud"}],
    ...                    starts_at="2024-05-01T12:00:00", ends_at="2024-05-01T16:00:00+02:00",
    ...                    created_by="ana", comment="retraining")
    >>> spec.starts_at.isoformat(), spec.ends_at.isoformat()
    ('2024-05-01T12:00:00+00:00', '2024-05-01T14:00:00+00:00')
    """

    matchers: tuple[Matcher, ...] = Field(..., min_length=1, max_length=MAX_MATCHERS, **LAX,
                                          description="All must match for an alert to be silenced")
    starts_at: datetime | None = Field(None, description="Start (ISO 8601; naive is UTC); default now",
                                       **LAX)
    ends_at: datetime = Field(..., description="End, exclusive (ISO 8601; naive is UTC)", **LAX)
    created_by: str = Field(..., min_length=1, max_length=256, description="Who created the silence")
    comment: str = Field(..., min_length=1, max_length=2048, description="Why")

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "matchers": [{"name": "model", "value": "fraud-v3"},
                     {"name": "check", "value": "psi|ks", "regex": True}],
        "ends_at": "2024-05-01T18:00:00Z", "created_by": "ana", "comment": "retraining fraud-v3"}]})

    _matchers = field_validator("matchers")(_not_all_match_empty)
    _utc = field_validator("starts_at")(_utc_or_none)
    _end = field_validator("ends_at")(_after_start)


class Silence(StrictModel):
    """A stored silence: the request, with its start resolved, an id and a creation time.

    Attributes
    ----------
    id : str
    created_at : datetime
        UTC.
    matchers : tuple of Matcher
    starts_at, ends_at : datetime
        UTC; active on ``[starts_at, ends_at)``.
    created_by, comment : str

    Examples
    --------
    >>> s = Silence(id="s1", created_at="2024-05-01T12:00:00", starts_at="2024-05-01T12:00:00",
    ...             ends_at="2024-05-01T14:00:00", created_by="ana", comment="retraining",
    ...             matchers=[{"name": "model", "value": "fraud"}])
    >>> s.matches({"model": "fraud", "check": "psi"}), s.matches({"model": "churn"})
    (True, False)
    >>> [s.state(datetime(2024, 5, 1, h)) for h in (11, 12, 14)]
    ['pending', 'active', 'expired']
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(..., min_length=1, description="Silence id")
    created_at: datetime = Field(..., description="When it was created (UTC)", **LAX)
    matchers: tuple[Matcher, ...] = Field(..., min_length=1, max_length=MAX_MATCHERS, **LAX)
    starts_at: datetime = Field(..., description="Start, inclusive (UTC)", **LAX)
    ends_at: datetime = Field(..., description="End, exclusive (UTC)", **LAX)
    created_by: str = Field(..., min_length=1, max_length=256)
    comment: str = Field(..., min_length=1, max_length=2048)

    _matchers = field_validator("matchers")(_not_all_match_empty)
    _utc = field_validator("created_at", "starts_at")(_utc_or_none)
    _end = field_validator("ends_at")(_not_before_start)

    def state(self, now: datetime | float) -> SilenceState:
        """``"pending"`` before ``starts_at``, ``"active"`` until ``ends_at``
        (exclusive), ``"expired"`` from then on.

        Parameters
        ----------
        now : datetime or float
            A datetime (naive is UTC) or Unix seconds.
        """
        t = as_utc(now)
        if t < self.starts_at:
            return "pending"
        return "active" if t < self.ends_at else "expired"

    def matches(self, labels: Mapping[str, str | None]) -> bool:
        """Whether an alert with these labels satisfies every matcher.

        Parameters
        ----------
        labels : mapping of str to str or None
            The alert's labels; a missing or None label is ``""``.

        Examples
        --------
        >>> s = Silence(id="s1", created_at=0, starts_at=0, ends_at=60, created_by="ana",
        ...             comment="c", matchers=[{"name": "model", "value": "fraud"},
        ...                                    {"name": "feature", "value": ".+", "regex": True,
        ...                                     "equal": False}])
        >>> s.matches({"model": "fraud"}), s.matches({"model": "fraud", "feature": None})
        (True, True)
        >>> s.matches({"model": "fraud", "feature": "amount"})
        False
        """
        return all(m.matches_value(labels.get(m.name)) for m in self.matchers)


def new_silence(spec: SilenceSpec, silence_id: str, now: datetime | float) -> Silence:
    """The silence created from ``spec`` at ``now``.

    A missing or past ``starts_at`` becomes ``now`` (as Alertmanager does for a
    new silence), so a silence never starts before it was created.

    Parameters
    ----------
    spec : SilenceSpec
    silence_id : str
    now : datetime or float
        Creation time: a datetime (naive is UTC) or Unix seconds.

    Returns
    -------
    Silence

    Raises
    ------
    ValueError
        When ``spec.ends_at`` is not after the resolved start (it ends in the
        past, or before it would start).

    Examples
    --------
    >>> spec = SilenceSpec(matchers=[{"name": "model", "value": "fraud"}],
    ...                    ends_at="2024-05-01T14:00:00", created_by="ana", comment="retraining")
    >>> s = new_silence(spec, "s1", datetime(2024, 5, 1, 12))
    >>> s.starts_at.isoformat(), s.state(datetime(2024, 5, 1, 12))
    ('2024-05-01T12:00:00+00:00', 'active')
    >>> new_silence(spec, "s2", datetime(2024, 5, 1, 15))
    Traceback (most recent call last):
    ...
    ValueError: ends_at (2024-05-01T14:00:00+00:00) must be after the start (2024-05-01T15:00:00+00:00)
    """
    t = as_utc(now)
    start = t if spec.starts_at is None or spec.starts_at < t else spec.starts_at
    if spec.ends_at <= start:
        raise ValueError(f"ends_at ({spec.ends_at.isoformat()}) must be after the start "
                         f"({start.isoformat()})")
    return Silence(id=silence_id, created_at=t, matchers=spec.matchers, starts_at=start,
                   ends_at=spec.ends_at, created_by=spec.created_by, comment=spec.comment)


def expire(silence: Silence, now: datetime | float) -> Silence:
    """``silence`` ended at ``now`` (what deleting a silence does).

    An active silence ends now; a pending one starts and ends now (so it never
    was active); an expired one is returned unchanged.

    Examples
    --------
    >>> s = Silence(id="s1", created_at=0, starts_at=0, ends_at=3600, created_by="ana",
    ...             comment="c", matchers=[{"name": "model", "value": "fraud"}])
    >>> e = expire(s, 60)
    >>> e.ends_at.timestamp(), e.state(60)
    (60.0, 'expired')
    >>> expire(e, 120) == e
    True
    """
    t = as_utc(now)
    state = silence.state(t)
    if state == "expired":
        return silence
    update = {"ends_at": t} if state == "active" else {"starts_at": t, "ends_at": t}
    return Silence.model_validate({**dict(silence), **update})


def silencing(silences: Iterable[Silence], labels: Mapping[str, str | None],
              now: datetime | float) -> list[str]:
    """Ids of the silences active at ``now`` that match ``labels``, in input order.

    An alert is silenced when this is not empty.

    Parameters
    ----------
    silences : iterable of Silence
    labels : mapping of str to str or None
        The alert's labels (``model``, ``feature``, ``check``, ``severity``,
        ``owner``); missing or None is ``""``.
    now : datetime or float
        A datetime (naive is UTC) or Unix seconds.

    Returns
    -------
    list of str

    Examples
    --------
    >>> def sil(i, start, end, **m):
    ...     return Silence(id=i, created_at=0, starts_at=start, ends_at=end, created_by="ana",
    ...                    comment="c", matchers=[{"name": k, "value": v} for k, v in m.items()])
    >>> ss = [sil("a", 0, 600, model="fraud"), sil("b", 0, 600, model="churn"),
    ...       sil("c", 300, 600, model="fraud"), sil("d", 0, 100, model="fraud")]
    >>> silencing(ss, {"model": "fraud", "check": "psi"}, 200)
    ['a']
    """
    return [s.id for s in silences if s.state(now) == "active" and s.matches(labels)]
