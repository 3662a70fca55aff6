"""``python -m service.cli``: the ``fleetwatch`` command."""

from service.cli import app

app(prog_name="fleetwatch")
