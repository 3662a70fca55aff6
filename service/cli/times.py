"""Times on the command line: Go-style durations (Alertmanager's ``--duration``) and
``--since`` given as a duration back from now or as a time."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import typer

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w))+")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800}


def parse_duration(text: str, option: str = "--duration") -> timedelta:
    """A Go-style duration (Alertmanager's ``--duration``): ``2h``, ``90m``, ``1h30m``, ``1d``, ``1w``.

    Raises
    ------
    typer.BadParameter
        If ``text`` is not one, or is zero.

    Examples
    --------
    >>> parse_duration("1h30m"), parse_duration("2d")
    (datetime.timedelta(seconds=5400), datetime.timedelta(days=2))
    """
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        raise typer.BadParameter(f"{text!r}: expected a duration such as 2h, 90m, 1h30m, 1d",
                                 param_hint=option)
    seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    if seconds <= 0:
        raise typer.BadParameter("must be longer than 0", param_hint=option)
    return timedelta(seconds=seconds)


def since(text: str | None, now: datetime | None = None) -> str | None:
    """A ``--since`` value for the API: a duration back from ``now`` (``2h``, ``1d``) as an
    ISO 8601 time, else ``text`` as given (ISO 8601 or Unix seconds, which the API reads).

    Examples
    --------
    >>> since("2h", datetime(2024, 5, 1, 12, tzinfo=UTC))
    '2024-05-01T10:00:00+00:00'
    >>> since("2024-05-01T00:00:00Z"), since(None)
    ('2024-05-01T00:00:00Z', None)
    """
    if text is None or not _DURATION.fullmatch(text.strip()):
        return text
    return ((now or datetime.now(UTC)) - parse_duration(text.strip(), "--since")).isoformat()
