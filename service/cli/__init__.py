"""The ``fleetwatch`` command line.

Running the service: ``run`` (every role, embedded broker and Redis when none is
configured), ``aggregate | detect | join | notify | serve`` (one role each), ``demo``,
``simulate``, ``bench`` (:mod:`service.cli.roles`). Acting on a running service through its
API, as amtool does on Alertmanager: ``models``, ``status``, ``flush``
(:mod:`service.cli.models`), ``performance`` (:mod:`service.cli.performance`), ``reference``
(:mod:`service.cli.reference`), ``alerts``, ``incidents`` (:mod:`service.cli.alerts`),
``silence`` (:mod:`service.cli.silences`), ``keys`` (:mod:`service.cli.keys`); where
the API is and which key is sent: :mod:`service.cli.connection`.
"""

from __future__ import annotations

import typer

from service.cli import alerts, keys, models, performance, reference, roles, silences
from service.cli.connection import ApiKey, ApiUrl, GlobalOptions, before_subcommand

app = typer.Typer(help="fleetwatch: streaming monitoring for fleets of ML models.", no_args_is_help=True)


@app.callback()
def main(ctx: typer.Context, url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """fleetwatch: streaming monitoring for fleets of ML models.

    --url and --api-key go before the subcommand (for every command over the API) or after
    it; given in both places, the one after the subcommand wins.
    """
    before_subcommand(ctx, GlobalOptions(url, api_key))

app.add_typer(roles.app)
app.add_typer(models.top)
app.add_typer(performance.app)
app.add_typer(models.app, name="models")
app.add_typer(reference.app, name="reference")
app.add_typer(alerts.app, name="alerts")
app.add_typer(alerts.incidents_app, name="incidents")
app.add_typer(silences.app, name="silence")
app.add_typer(keys.app, name="keys")

__all__ = ["app"]
