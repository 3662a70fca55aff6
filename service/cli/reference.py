"""``fleetwatch reference upload|show``: a model's reference (baseline) profile, through the
API (docs/profiles.md, "Reference profiles")."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from sdk.record import RecordError
from sdk.reference import upload_reference
from service.cli.connection import ApiKey, ApiUrl, Json, api, fail, sdk_errors, segment
from service.cli.output import fields, floors_text, show, table

app = typer.Typer(help="Reference (baseline) profiles: upload, show.", no_args_is_help=True)
File = Annotated[Path | None, typer.Option(exists=True, dir_okay=False, show_default=False)]
Column = Annotated[str | None, typer.Option(show_default=False)]


def read_table(csv: Path | None, parquet: Path | None) -> Any:
    """The rows of exactly one of ``csv`` and ``parquet`` as a pandas DataFrame.

    Raises
    ------
    typer.BadParameter
        Neither or both given, or the file does not parse.
    """
    import pandas as pd

    if (csv is None) == (parquet is None):
        raise typer.BadParameter("give exactly one of --csv and --parquet")
    try:
        return pd.read_csv(csv) if csv is not None else pd.read_parquet(parquet)
    except ImportError as exc:  # pandas' parquet engine (pyarrow, the server extra) missing
        raise typer.BadParameter(f"cannot read Parquet: {exc}", param_hint="--parquet") from None
    except (ValueError, OSError) as exc:
        option = "--csv" if csv is not None else "--parquet"
        raise typer.BadParameter(f"{csv or parquet}: {exc}", param_hint=option) from None


def check_columns(columns: list[str], named: dict[str, str | None]) -> None:
    """Every column an option names is one of ``columns``.

    Raises
    ------
    typer.BadParameter
        Naming the option and the file's columns, e.g. ``--score-column 'nosuch' is not a
        column of the file (columns: amount, country, score)``: without this check every
        column, the score too, would silently become a feature.

    Examples
    --------
    >>> check_columns(["amount", "score"], {"--score-column": "score", "--label-column": None})
    """
    for option, name in named.items():
        if name is not None and name not in columns:
            raise typer.BadParameter(f"{name!r} is not a column of the file (columns: "
                                     f"{', '.join(map(str, columns))})", param_hint=option)


@app.command("upload")
def upload(
    model: Annotated[str, typer.Argument(help="Model id (registered first)", show_default=False)],
    csv: File = None,
    parquet: File = None,
    score_column: Column = None,
    label_column: Annotated[str | None, typer.Option(help="Column holding the predicted label",
                                                     show_default=False)] = None,
    truth_column: Annotated[str | None, typer.Option(
        help="Column holding the true label: the labelled reference becomes the baseline of the "
             "label-joined checks (tier-1 models with performance)", show_default=False)] = None,
    time_column: Annotated[str | None, typer.Option(
        help="Column holding each row's event time (Unix seconds): each feature's floors are then "
             "learned from how much it moves between the model's windows (docs/detectors.md)",
        show_default=False)] = None,
    merge: Annotated[bool, typer.Option("--merge", help="Merge into the model's reference instead of "
                                                        "replacing it")] = False,
    url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False,
) -> None:
    """Replace a registered model's reference profile with one built from a CSV or Parquet
    file, one row per prediction (POST /v1/models/{id}/reference; write scope). Every column
    but the score, label, truth and time columns is a feature."""
    frame = read_table(csv, parquet)
    check_columns([str(c) for c in frame.columns], {
        "--score-column": score_column, "--label-column": label_column, "--truth-column": truth_column,
        "--time-column": time_column})
    with api(url, api_key) as client:
        view = client.get(f"/models/{segment(model)}")  # 404 model_not_found: before any upload
        declared = set((view.get("config") or {}).get("features") or {})
        named = {score_column, label_column, truth_column, time_column}
        extra = [str(c) for c in frame.columns if declared and c not in declared and c not in named]
        if extra:
            typer.echo(f"note: column(s) {', '.join(extra)} are not features declared for {model} "
                       f"(declared: {', '.join(sorted(declared))}): they are profiled as features; a "
                       "score, label, truth or time column needs its option", err=True)
        try:
            with sdk_errors(client):
                answer = upload_reference(client.url, model, frame, score_column=score_column,
                                          label_column=label_column, truth_column=truth_column,
                                          time_column=time_column,
                                          api_key=client.api_key, replace=not merge)
        except RecordError as exc:
            raise fail(f"{exc.field}: {exc.message}") from None
    columns = [f"{what} column {name}" for what, name in (
        ("score", score_column), ("label", label_column), ("truth", truth_column), ("time", time_column))
        if name]
    show(answer, as_json, lambda a: typer.echo(
        f"reference of {a['model_id']}: {a['count']} rows, features {', '.join(a['features'])}"
        + "".join(f"; {c}" for c in columns)
        + ("; labelled: the baseline of the label-joined checks" if truth_column else "")
        + ("" if a.get("learned_floors") is None else
           f"\nfloors: {floors_text({'configured': {}, 'learned': a['learned_floors']}).split('; ', 1)[1]}")
        + shape_text(a.get("daily_shape"))))


def shape_text(shape: dict[str, Any] | None) -> str:
    """The daily shape of an upload's event times in a line (empty without one)."""
    if shape is None:
        return ""
    if shape["hourly"] is None:
        return f"\ndaily shape: none ({shape['missing']})"
    hourly = shape["hourly"]
    low, high = hourly.index(min(hourly)), hourly.index(max(hourly))
    return (f"\ndaily shape of {shape['rows']} event times ({shape['zone'] or 'UTC'}): lowest at "
            f"{low:02d}:00 (x{min(hourly):.2f} the day's mean), highest at {high:02d}:00 "
            f"(x{max(hourly):.2f})")


def _show_reference(ref: dict[str, Any]) -> None:
    fields([("model", ref["model_id"]), ("rows", ref["count"]),
            ("score", ref["score"]), ("predictions", ref["predictions"] or "-")])
    typer.echo("")
    table([{"name": k, **v, "bins": ref["edges"].get(k)} for k, v in ref["features"].items() if k], [
        ("FEATURE", lambda f: f["name"]), ("KIND", lambda f: f.get("kind")),
        ("NULL RATE", lambda f: f.get("null_rate")), ("MIN", lambda f: f.get("min")),
        ("MAX", lambda f: f.get("max")), ("MEAN", lambda f: f.get("mean")),
        ("TOP", lambda f: f.get("top")),
        ("BINS", lambda f: None if f["bins"] is None else len(f["bins"]["edges"]) + 1),
    ], "no features")


@app.command("show")
def show_reference(model: Annotated[str, typer.Argument(help="Model id", show_default=False)],
                   url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False) -> None:
    """A model's reference profile, summarised (GET /v1/models/{id}/reference)."""
    with api(url, api_key) as client:
        show(client.get(f"/models/{segment(model)}/reference"), as_json, _show_reference)
