"""``fleetwatch silence add|list|expire``: silences with Alertmanager-style matchers, as
amtool writes them (``model=fraud-v3``, ``check=~"psi|ks"``, ``owner!=payments``,
``feature!~".+"``); docs/alerting.md, "Silences"."""

from __future__ import annotations

import getpass
import re
from datetime import UTC, datetime
from typing import Annotated, Any, get_args

import typer

from detectors.policy.silence import LabelName
from service.cli.connection import ApiKey, ApiUrl, Json, Offset, api, segment
from service.cli.output import cell, print_json, show, table, when
from service.cli.times import parse_duration

app = typer.Typer(help="Silences: mute matching alerts for a time.", no_args_is_help=True)

LABELS = get_args(LabelName)
#: ``name op value``: the operators of Alertmanager's matchers, longest first.
_MATCHER = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*(.*?)\s*\Z", re.DOTALL)


def parse_matcher(text: str) -> dict[str, Any]:
    """One Alertmanager-style matcher as the API's ``{"name", "value", "regex", "equal"}``.

    ``=`` equal, ``!=`` not equal, ``=~`` matches the (anchored, RE2) regular expression,
    ``!~`` does not; the value may be double-quoted (``\\"`` and ``\\\\`` escapes inside).

    Raises
    ------
    typer.BadParameter
        Not ``name op value``, an unknown label (the labels are model, feature, check,
        severity, owner) or an empty value. An invalid regular expression is the API's to
        refuse (422 naming ``matchers``).

    Examples
    --------
    >>> parse_matcher("model=fraud-v3")
    {'name': 'model', 'value': 'fraud-v3', 'regex': False, 'equal': True}
    >>> parse_matcher('check=~"psi|ks"')
    {'name': 'check', 'value': 'psi|ks', 'regex': True, 'equal': True}
    >>> parse_matcher("owner!=payments")["equal"]
    False
    """
    m = _MATCHER.match(text)
    if m is None:
        raise typer.BadParameter(f"{text!r} is not a matcher: expected LABEL=VALUE, LABEL!=VALUE, "
                                 "LABEL=~REGEX or LABEL!~REGEX", param_hint="MATCHERS")
    name, op, value = m.groups()
    if name not in LABELS:
        raise typer.BadParameter(f"{text!r}: unknown label {name!r}; silences match {', '.join(LABELS)}",
                                 param_hint="MATCHERS")
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = re.sub(r"\\(.)", r"\1", value[1:-1])
    if not value:
        raise typer.BadParameter(f"{text!r}: empty value", param_hint="MATCHERS")
    return {"name": name, "value": value, "regex": "~" in op, "equal": not op.startswith("!")}


def matcher_text(m: dict[str, Any]) -> str:
    """A matcher as amtool prints it.

    Examples
    --------
    >>> matcher_text({"name": "check", "value": "psi|ks", "regex": True, "equal": False})
    'check!~"psi|ks"'
    """
    op = ("=" if m["equal"] else "!") + ("~" if m["regex"] else "")
    op = "!=" if op == "!" else op
    value = m["value"].replace("\\", "\\\\").replace('"', '\\"')
    return f'{m["name"]}{op}"{value}"'


def _start(text: str | None) -> datetime:
    if text is None:
        return datetime.now(UTC)
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not an ISO 8601 time", param_hint="--start") from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t


SILENCE_COLUMNS = [
    ("ID", lambda s: s["id"]), ("STATE", lambda s: s["state"]),
    ("MATCHERS", lambda s: " ".join(matcher_text(m) for m in s["matchers"])),
    ("STARTS", lambda s: when(s["starts_at"])), ("ENDS", lambda s: when(s["ends_at"])),
    ("CREATED BY", lambda s: s["created_by"]), ("COMMENT", lambda s: s["comment"]),
]


@app.command("add")
def add(
    matchers: Annotated[list[str], typer.Argument(
        help='Matchers, all of which an alert must satisfy: model=fraud-v3 check=~"psi|ks" '
             "owner!=payments (labels: model, feature, check, severity, owner)", show_default=False)],
    comment: Annotated[str, typer.Option("--comment", "-c", help="Why (required)", show_default=False)],
    duration: Annotated[str, typer.Option("--duration", "-d", help="How long: 2h, 90m, 1h30m, 1d")] = "1h",
    start: Annotated[str | None, typer.Option(help="Start (ISO 8601; naive is UTC); default now")] = None,
    by: Annotated[str | None, typer.Option("--by", help="Who; default: your user name",
                                           show_default=False)] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the silence's id")] = False,
    url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False,
) -> None:
    """Silence the alerts matching all MATCHERS from now (or --start) for --duration
    (POST /v1/silences; write scope). Silenced alerts are still computed and listed, only
    not notified."""
    parsed = [parse_matcher(m) for m in matchers]
    starts = _start(start)
    body = {"matchers": parsed, "starts_at": starts.isoformat(),
            "ends_at": (starts + parse_duration(duration)).isoformat(),
            "created_by": by or getpass.getuser(), "comment": comment}
    with api(url, api_key) as client:
        silence = client.request("POST", "/silences", body=body)
    if quiet:
        typer.echo(silence["id"])
    elif as_json:
        print_json(silence)
    else:
        typer.echo(f"silence {silence['id']} {silence['state']} until {when(silence['ends_at'])} UTC: "
                   + " ".join(matcher_text(m) for m in silence["matchers"]))


@app.command("list")
def list_silences(
    state: Annotated[str | None, typer.Option(help="pending, active or expired")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Silences per page")] = 100,
    offset: Offset = 0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the ids")] = False,
    url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False,
) -> None:
    """Silences, newest first (GET /v1/silences)."""
    with api(url, api_key) as client:
        silences = client.get("/silences", state=state, limit=limit, offset=offset)
    if quiet:
        for s in silences:
            typer.echo(s["id"])
        return
    show(silences, as_json, lambda ss: table(ss, SILENCE_COLUMNS, "no silences"))


@app.command("expire")
def expire(
    silence_ids: Annotated[list[str], typer.Argument(help="Silence ids", show_default=False)],
    url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False,
) -> None:
    """End silences now (DELETE /v1/silences/{id}; write scope); they stay listed as expired."""
    done = []
    with api(url, api_key) as client:
        for silence_id in silence_ids:
            done.append(client.request("DELETE", f"/silences/{segment(silence_id)}"))
            if not as_json:
                typer.echo(f"{silence_id}: {cell(done[-1]['state'])}")
    if as_json:
        print_json(done)
