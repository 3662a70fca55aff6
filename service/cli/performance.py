"""``fleetwatch performance MODEL``: label-joined cohorts of a tier-1 model with a
``performance`` configuration (docs/labels.md), one line per cohort."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from service.cli.connection import ApiKey, ApiUrl, Json, api, segment
from service.cli.output import Column, fields, show, table, when

app = typer.Typer()

#: The realized metrics shown per task (the API answers more: --json).
METRICS = {"binary": ("roc_auc", "log_loss", "accuracy"), "multiclass": ("accuracy", "macro_f1"),
           "regression": ("mae", "rmse", "bias")}


def checks(cohort: dict[str, Any]) -> str:
    """The cohort's checks as ``check=status`` (``-``: not judged, e.g. immature).

    Examples
    --------
    >>> checks({"evaluation": {"results": [{"check": "auc_drop", "status": "drift"}]}})
    'auc_drop=drift'
    >>> checks({"evaluation": None})
    '-'
    """
    results = (cohort.get("evaluation") or {}).get("results") or []
    return " ".join(f"{r['check']}={r['status']}" for r in results) or "-"


def _show(perf: dict[str, Any]) -> None:
    fields([("model", perf["model_id"]), ("task", perf["task"]), ("threshold", perf["threshold"]),
            ("slice", None if perf["slice"] is None else f"{perf['slice']['key']}={perf['slice']['value']}"),
            ("labels", perf["labels"])])
    typer.echo("")
    columns: list[Column] = [
        ("WINDOW", lambda c: when(c["window_start"])), ("PREDICTIONS", lambda c: c["predictions"]),
        ("LABELED", lambda c: c["labeled"]), ("MATURE", lambda c: c["maturity"]["mature"])]
    columns += [(name.upper().replace("_", " "), lambda c, n=name: c["realized"].get(n))
                for name in METRICS[perf["task"]]]
    columns += [("BASELINE", lambda c: (c.get("evaluation") or {}).get("baseline")), ("CHECKS", checks)]
    table(perf["cohorts"], columns, "no cohorts yet (labels join predictions of this model's windows)")


@app.command("performance")
def performance(
    model: Annotated[str, typer.Argument(help="Model id", show_default=False)],
    slice_: Annotated[str | None, typer.Option("--slice", help="KEY:VALUE, one of the model's slices",
                                               show_default=False)] = None,
    since: Annotated[str | None, typer.Option(help="Cohort window start >= (ISO 8601 or Unix s)")] = None,
    until: Annotated[str | None, typer.Option(help="Cohort window start <= (ISO 8601 or Unix s)")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Cohorts, oldest first")] = 200,
    url: ApiUrl = None, api_key: ApiKey = None, as_json: Json = False,
) -> None:
    """Realized performance of a model's label-joined cohorts, their maturity and checks
    (GET /v1/models/{id}/performance; tier-1 models with performance)."""
    with api(url, api_key) as client:
        perf = client.get(f"/models/{segment(model)}/performance", slice=slice_, limit=limit,
                          **{"from": since, "to": until})
    show(perf, as_json, _show)
