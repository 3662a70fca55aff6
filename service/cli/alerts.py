"""``fleetwatch alerts list|show|ack|resolve`` and ``fleetwatch incidents list|show``
(docs/alerting.md)."""

from __future__ import annotations

import getpass
from collections.abc import Sequence
from typing import Annotated

import typer

from service.alerting.models import Alert, Incident
from service.cli.connection import ApiKey, ApiUrl, Json, Offset, api, segment
from service.cli.output import Column, fields, print_json, show, table, when
from service.cli.times import since as since_

app = typer.Typer(help="Alerts: list, show, acknowledge, resolve.", no_args_is_help=True)
incidents_app = typer.Typer(help="Incidents (alerts grouped by root cause): list, show.",
                            no_args_is_help=True)

AlertIds = Annotated[list[str], typer.Argument(help="Alert ids (`fleetwatch alerts list -q` prints them)",
                                               show_default=False)]
By = Annotated[str | None, typer.Option("--by", help="Who acts; default: your user name",
                                        show_default=False)]
Comment = Annotated[str | None, typer.Option("--comment", "-c", help="Why")]
Since = Annotated[str | None, typer.Option(
    help="Created at or after: a duration back from now (2h, 1d) or a time (ISO 8601, Unix seconds)")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Print only the ids, one a line")]

ALERT_COLUMNS: list[Column] = [
    ("ID", lambda a: a.id), ("STATE", lambda a: a.state), ("SEVERITY", lambda a: a.severity),
    ("MODEL", lambda a: a.model_id), ("FEATURE", lambda a: a.feature or "-"),
    ("CHECK", lambda a: a.check), ("EFFECT", lambda a: a.effect_size),
    ("FLOOR", lambda a: a.floor), ("WINDOW", lambda a: when(a.window_start)),
    ("INCIDENT", lambda a: a.incident_id),
    ("SILENCED BY", lambda a: a.silenced_by or None),
]


def _ids_or_table(rows: Sequence[Alert | Incident], as_json: bool, quiet: bool, columns: list[Column],
                  empty: str) -> None:
    if quiet:
        for r in rows:
            typer.echo(r.id)
        return
    else:
        show(rows, as_json, lambda rs: table(rs, columns, empty))


@app.command("list")
def list_alerts(
    model: Annotated[str | None, typer.Option(help="Only this model's alerts")] = None,
    state: Annotated[str | None, typer.Option(help="firing, acknowledged or resolved")] = None,
    severity: Annotated[str | None, typer.Option(help="info, warning or critical")] = None,
    since: Since = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Alerts per page")] = 100,
    offset: Offset = 0,
    quiet: Quiet = False,
    url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False,
) -> None:
    """Alerts, newest first (GET /v1/alerts)."""
    with api(url, api_key) as client:
        alerts = [Alert.model_validate(a) for a in client.get(
            "/alerts", model=model, state=state, severity=severity, since=since_(since),
            limit=limit, offset=offset)]
    _ids_or_table(alerts, as_json, quiet, ALERT_COLUMNS, "no alerts")


def _show_alert(a: Alert) -> None:
    fields([
        ("alert", a.id), ("state", a.state), ("severity", a.severity),
        ("model", f"{a.model_id} (version {a.model_version or '-'})"),
        ("feature", a.feature or "-"), ("check", a.check),
        ("effect size", a.effect_size), ("floor", a.floor), ("p-value", a.p_value),
        ("window", f"{when(a.window_start)} to {when(a.window_end)}"),
        ("fired at window", when(a.fired_window_start)),
        ("incident", a.incident_id), ("source", a.source),
        ("owner", a.owner), ("routing", a.routing),
        ("silenced by", a.silenced_by), ("inhibited by", a.inhibited_by),
        ("acknowledged", None if not a.acked_by else
         f"by {a.acked_by} at {when(a.acked_at)}: {a.ack_comment or '-'}"),
        ("resolved by", a.resolved_by),
        ("evidence", [f"{when(e.window_start)} effect {e.effect_size:.4g}" for e in a.evidence]),
    ])


@app.command("show")
def show_alert(alert_id: Annotated[str, typer.Argument(help="Alert id", show_default=False)],
               url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False) -> None:
    """One alert with its evidence (GET /v1/alerts/{id})."""
    with api(url, api_key) as client:
        alert = Alert.model_validate(client.get(f"/alerts/{segment(alert_id)}"))
    show(alert, as_json, _show_alert)


def _act(action: str, alert_ids: list[str], by: str | None, comment: str | None, url: str | None,
         api_key: str | None, as_json: bool) -> None:
    body = {"by": by or getpass.getuser(), "comment": comment}
    done = []
    with api(url, api_key) as client:
        for alert_id in alert_ids:  # in order; the first refusal stops (printed, exit 1)
            done.append(Alert.model_validate(
                client.request("POST", f"/alerts/{segment(alert_id)}/{action}", body=body)))
            if not as_json:
                typer.echo(f"{alert_id}: {done[-1].state} (by {body['by']})")
    if as_json:
        print_json(done)


@app.command("ack")
def ack(alert_ids: AlertIds, by: By = None, comment: Comment = None,
        url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False) -> None:
    """Acknowledge firing alerts (POST /v1/alerts/{id}/ack; write scope)."""
    _act("ack", alert_ids, by, comment, url, api_key, as_json)


@app.command("resolve")
def resolve(alert_ids: AlertIds, by: By = None, comment: Comment = None,
            url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False) -> None:
    """Resolve alerts by hand (POST /v1/alerts/{id}/resolve; write scope)."""
    _act("resolve", alert_ids, by, comment, url, api_key, as_json)


INCIDENT_COLUMNS: list[Column] = [
    ("ID", lambda i: i.id), ("STATE", lambda i: i.state), ("SEVERITY", lambda i: i.severity),
    ("TITLE", lambda i: i.title), ("MODELS", lambda i: i.models),
    ("FEATURES", lambda i: i.features), ("ALERTS", lambda i: i.alert_count),
    ("FIRST WINDOW", lambda i: when(i.first_window_start)),
]


@incidents_app.command("list")
def list_incidents(
    model: Annotated[str | None, typer.Option(help="Only incidents touching this model")] = None,
    state: Annotated[str | None, typer.Option(help="open or resolved")] = None,
    since: Since = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="Incidents per page")] = 50,
    offset: Offset = 0,
    quiet: Quiet = False,
    url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False,
) -> None:
    """Incidents, newest first (GET /v1/incidents)."""
    with api(url, api_key) as client:
        incidents = [Incident.model_validate(i) for i in client.get(
            "/incidents", model=model, state=state, since=since_(since), limit=limit, offset=offset)]
    _ids_or_table(incidents, as_json, quiet, INCIDENT_COLUMNS, "no incidents")


def _show_incident(i: Incident) -> None:
    fields([("incident", i.id), ("title", i.title), ("state", i.state),
            ("severity", i.severity), ("source", i.source), ("models", i.models),
            ("features", i.features), ("checks", i.checks),
            ("first window", when(i.first_window_start)), ("opened", when(i.created_at))])
    typer.echo("")
    table(i.alerts, ALERT_COLUMNS, "no alerts")


@incidents_app.command("show")
def show_incident(incident_id: Annotated[str, typer.Argument(help="Incident id", show_default=False)],
                  url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False) -> None:
    """One incident with its alerts (GET /v1/incidents/{id})."""
    with api(url, api_key) as client:
        incident = Incident.model_validate(client.get(f"/incidents/{segment(incident_id)}"))
    show(incident, as_json, _show_incident)
