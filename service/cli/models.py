"""``fleetwatch models list|show|patch|delete``, ``fleetwatch status [MODEL]`` and
``fleetwatch flush MODEL``: the model resource of the API (docs/api.md)."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
import typer

from service.alerting.models import Alert
from service.api.model_views import DELETED, KEPT
from service.cli.connection import ApiKey, ApiUrl, Json, Offset, api, fail, segment
from service.cli.output import fields, floors_text, show, table, when

app = typer.Typer(help="Registered models: list, show, change (PATCH), delete.", no_args_is_help=True)
top = typer.Typer()  # commands at the top level: status, flush
Model = Annotated[str, typer.Argument(help="Model id", show_default=False)]
#: Models whose status `fleetwatch status` reads without a model (one request each).
FLEET_STATUS_MODELS = 200


@app.command("list")
def list_models(
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Models per page")] = 100,
    offset: Offset = 0,
    url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False,
) -> None:
    """Registered models (and models created by their records), by id."""
    with api(url, api_key) as client:
        models = client.get("/models", limit=limit, offset=offset)
    show(models, as_json, lambda ms: table(ms, [
        ("MODEL", lambda m: m["model_id"]),
        ("TIER", lambda m: (m["config"] or {}).get("tier")),
        ("OWNER", lambda m: (m["config"] or {}).get("owner")),
        ("WINDOW S", lambda m: (m["config"] or {}).get("window_seconds")),
        ("PERFORMANCE", lambda m: (m["config"] or {}).get("performance") is not None),
        ("REFERENCE", lambda m: m["has_reference"]),
        ("LATE", lambda m: m["late_records"]),
        ("FUTURE", lambda m: m["future_records"]),
        ("CONFIG ERROR", lambda m: m.get("config_error")),
    ], "no models"))


def _show_model(m: dict[str, Any]) -> None:
    config = m["config"] or {}
    ref = m["reference"]
    fields([
        ("model", m["model_id"]), ("registered", m["registered"]),
        ("config error", m["config_error"]),
        ("tier", config.get("tier")), ("owner", config.get("owner")),
        ("window seconds", config.get("window_seconds")), ("routing", config.get("routing")),
        ("features", {k: v["type"] for k, v in (config.get("features") or {}).items()}),
        ("lineage", "; ".join(f"{src}: {', '.join(feats)}" for src, feats in m["lineage"].items()) or None),
        ("performance", config.get("performance")), ("persistence", config.get("persistence")),
        ("baseline", f"{m['baseline']['configured']} (last used: {m['baseline']['last_used'] or '-'})"),
        ("floors", floors_text(m.get("floors"))),
        ("reference", None if ref is None else f"{ref['count']} rows; features {', '.join(ref['features'])}"),
    ])


@app.command("show")
def show_model(model: Model, url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False) -> None:
    """A model: configuration, lineage, baseline, reference (GET /v1/models/{id})."""
    with api(url, api_key) as client:
        show(client.get(f"/models/{segment(model)}"), as_json, _show_model)


def parse_assignment(text: str) -> dict[str, Any]:
    """``a.b=value`` as the merge patch ``{"a": {"b": value}}``; the value is read as JSON
    (``1``, ``0.7``, ``true``, ``null``, ``["x"]``), else taken as a string.

    Raises
    ------
    typer.BadParameter
        Without ``=`` or with an empty name.

    Examples
    --------
    >>> parse_assignment("performance.threshold=0.7")
    {'performance': {'threshold': 0.7}}
    >>> parse_assignment("owner=risk-ml"), parse_assignment("owner=null")
    ({'owner': 'risk-ml'}, {'owner': None})
    """
    path, sep, raw = text.partition("=")
    names = path.split(".")
    if not sep or not all(n.strip() for n in names):
        raise typer.BadParameter(f"{text!r}: expected FIELD=VALUE (e.g. tier=1, performance.threshold=0.7)",
                                 param_hint="--set")
    try:
        value: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        value = raw
    for name in reversed(names):
        value = {name.strip(): value}
    return value


def merged(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two merge patches as one (``b`` wins; objects merge).

    Examples
    --------
    >>> merged({"performance": {"threshold": 0.7}}, {"performance": {"task": "binary"}, "tier": 1})
    {'performance': {'threshold': 0.7, 'task': 'binary'}, 'tier': 1}
    """
    out = dict(a)
    for k, v in b.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@app.command("patch")
def patch_model(
    model: Model,
    patch: Annotated[str | None, typer.Option(
        "--patch", "-p",
        help='A JSON merge patch, e.g. \'{"tier": 1, "routing": {"team": "risk"}}\'')] = None,
    assignments: Annotated[list[str] | None, typer.Option(
        "--set", help="FIELD=VALUE, repeatable; dots reach into sections (performance.threshold=0.7); "
                      "VALUE is JSON or a string; null puts the field back to its default")] = None,
    url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False,
) -> None:
    """Change some fields of a model's configuration and keep the rest (PATCH
    /v1/models/{id}, a JSON merge patch); prints the model as it now is."""
    body: dict[str, Any] = {}
    if patch is not None:
        try:
            body = orjson.loads(patch)
        except orjson.JSONDecodeError as exc:
            raise typer.BadParameter(f"not JSON: {exc}", param_hint="--patch") from None
        if not isinstance(body, dict):
            raise typer.BadParameter("a merge patch is a JSON object", param_hint="--patch")
    for text in assignments or []:
        body = merged(body, parse_assignment(text))
    if not body:
        raise typer.BadParameter("nothing to change: give --patch or --set")
    with api(url, api_key) as client:
        view = client.request("PATCH", f"/models/{segment(model)}", body=body)
    show(view, as_json, _show_model)


@app.command("delete")
def delete_model(
    model: Model,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking")] = False,
    url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False,
) -> None:
    """Delete a model and everything stored under it (DELETE /v1/models/{id}): says what is
    deleted and what is kept, and asks first unless --yes."""
    with api(url, api_key) as client:
        client.get(f"/models/{segment(model)}")  # an unknown model is refused before asking
        if not yes:
            typer.echo(f"Deleting model {model} deletes: " + "; ".join(DELETED) + ".", err=True)
            typer.echo("It keeps: " + "; ".join(KEPT) + ".", err=True)
            if not typer.confirm(f"Delete model {model}?", err=True):
                raise fail("nothing deleted")
        body = client.request("DELETE", f"/models/{segment(model)}")
    show(body, as_json, lambda b: fields([
        ("deleted model", b["model_id"]), ("redis keys removed", b["deleted_keys"]),
        ("deleted", b["deleted"]), ("kept", b["kept"])]))


def _show_status(s: dict[str, Any]) -> None:
    rec, win, last, fdr = s["records"], s["windows"], s["last_evaluated"], s["fdr"]
    rows: list[tuple[str, Any]] = [
        ("model", s["model_id"]),
        ("records", f"{rec['in_evaluated_windows']} in evaluated windows, {rec['late']} late, "
                    f"{rec['future']} future"),
        ("dead-lettered", rec.get("dead_lettered") or "none"),
        ("rejected by ingest", rec.get("rejected") or "none"),
        ("windows", f"{win['open']} open, {win['closed']} closed, {win['evaluated']} evaluated, "
                    f"{win['pending_policy']} pending policy, {win['abandoned']} abandoned"),
        ("skipped windows", win["skipped"] or "none"),
        ("last evaluated", "-" if last is None else
         f"{when(last['window_start'])} to {when(last['window_end'])} (version {last['version']}, "
         f"against {last['baseline']}, at {when(last['evaluated_at'])})"),
        ("baseline", f"{s['baseline']['configured']} (last used: {s['baseline']['last_used'] or '-'})"),
        ("floors", floors_text(s.get("floors"))),
        ("fdr", "-" if fdr is None else f"level {fdr['level']:.3g} on the window of "
                f"{when(fdr['window_start'])}: {fdr['discoveries']} of {fdr['tests']} tests through"),
    ]
    if s["labels"] is not None:
        rows.append(("labels", s["labels"]))
    fields(rows)


@top.command("status")
def status(
    model: Annotated[str | None, typer.Argument(help="Model id; without: every model, one line each",
                                                show_default=False)] = None,
    url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False,
) -> None:
    """What the service counted for a model (GET /v1/models/{id}/status): records, dead
    letters by reason, windows, the last evaluation, floors, FDR, labels; without MODEL, one
    line per model with its firing alerts."""
    with api(url, api_key) as client:
        if model is not None:
            show(client.get(f"/models/{segment(model)}/status"), as_json, _show_status)
            return
        ids = [m["model_id"] for m in client.get("/models", limit=FLEET_STATUS_MODELS)]
        statuses = [client.get(f"/models/{segment(m)}/status") for m in ids]
        firing = [Alert.model_validate(a) for a in client.get("/alerts", state="firing", limit=1000)]
    if as_json:
        show(statuses, True, print)
        return
    open_alerts = {m: sum(a.model_id == m for a in firing) for m in ids}
    table(statuses, [
        ("MODEL", lambda s: s["model_id"]),
        ("RECORDS", lambda s: s["records"]["in_evaluated_windows"]),
        ("DEAD-LETTERED", lambda s: sum((s["records"].get("dead_lettered") or {}).values())),
        ("OPEN W", lambda s: s["windows"]["open"]),
        ("EVALUATED", lambda s: s["windows"]["evaluated"]),
        ("SKIPPED", lambda s: sum(s["windows"]["skipped"].values())),
        ("LAST EVALUATED", lambda s: when((s["last_evaluated"] or {}).get("window_start"))),
        ("FIRING", lambda s: open_alerts[s["model_id"]]),
    ], "no models")
    if len(ids) == FLEET_STATUS_MODELS:
        typer.echo(f"(the first {FLEET_STATUS_MODELS} models; `fleetwatch status MODEL` for another)")


@top.command("flush")
def flush(model: Model, url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False) -> None:
    """Close a model's open windows now, after every record already sent (the end of a
    backfill or replay), through POST /v1/models/{id}/flush."""
    with api(url, api_key) as client:
        body = client.request("POST", f"/models/{segment(model)}/flush")
    if as_json:
        show(body, True, print)
        return
    if not isinstance(body, dict) or "partition" not in body:
        raise fail(f"unexpected answer {body!r}")
    typer.echo(f"flush of {model} requested (partition {body['partition']}, offset {body['offset']}): "
               "its open windows close when the aggregator reaches it")
