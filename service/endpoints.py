"""Where a running ``fleetwatch run`` listens: written to ``<data dir>/endpoints.env`` as the
``export FLEETWATCH_...=...`` lines a shell (or :meth:`sdk.client.Client.from_env`) reads.

The file is rewritten at every start; an embedded broker or Redis started on the same
data folder asks for the port it had last time (:func:`reusable_port`), so the lines
usually stay valid across restarts.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

FILENAME = "endpoints.env"
API_URL = "FLEETWATCH_API_URL"
KAFKA_BOOTSTRAP = "FLEETWATCH_KAFKA_BOOTSTRAP"
REDIS_URL = "FLEETWATCH_REDIS_URL"


@dataclass(frozen=True)
class Endpoints:
    """The API URL, the Kafka bootstrap address and the Redis URL of one running service."""

    api_url: str | None
    kafka_bootstrap: str
    redis_url: str

    def variables(self) -> dict[str, str]:
        out = {KAFKA_BOOTSTRAP: self.kafka_bootstrap, REDIS_URL: self.redis_url}
        if self.api_url is not None:
            out = {API_URL: self.api_url, **out}
        return out

    def export_lines(self) -> list[str]:
        """``export NAME=value`` lines for a POSIX shell (values quoted when needed).

        Examples
        --------
        >>> Endpoints("http://127.0.0.1:8000", "127.0.0.1:9092", "redis://127.0.0.1:6379/0").export_lines()[1]
        'export FLEETWATCH_KAFKA_BOOTSTRAP=127.0.0.1:9092'
        """
        return [f"export {k}={shlex.quote(v)}" for k, v in self.variables().items()]


def endpoints_path(data_dir: Path) -> Path:
    return data_dir / FILENAME


def write_endpoints(data_dir: Path, endpoints: Endpoints) -> Path:
    """Write ``endpoints`` to ``<data_dir>/endpoints.env`` atomically (a reader never
    sees half a file); returns its path."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = endpoints_path(data_dir)
    tmp = path.with_suffix(".tmp")
    text = ("# Endpoints of `fleetwatch run` on this data folder (rewritten at every start).\n"
            f"# Use them with: . {path}\n" + "\n".join(endpoints.export_lines()) + "\n")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def read_endpoints(data_dir: Path) -> dict[str, str]:
    """The variables of ``<data_dir>/endpoints.env`` ({} when there is none)."""
    path = endpoints_path(data_dir)
    out: dict[str, str] = {}
    with contextlib.suppress(FileNotFoundError):
        for line in path.read_text().splitlines():
            parts = shlex.split(line, comments=True)
            if len(parts) == 2 and parts[0] == "export" and "=" in parts[1]:
                name, value = parts[1].split("=", 1)
                out[name] = value
    return out


def previous_port(data_dir: Path, variable: str) -> int | None:
    """The port ``variable`` (the bootstrap address or the Redis URL) had in the last
    endpoints written to ``data_dir`` (None: unknown)."""
    value = read_endpoints(data_dir).get(variable)
    if not value:
        return None
    with contextlib.suppress(ValueError):
        return urlsplit(value if "://" in value else f"//{value.split(',')[0]}").port
    return None


def reusable_port(data_dir: Path, variable: str) -> int | None:
    """:func:`previous_port` if it is free on 127.0.0.1 now, else None."""
    port = previous_port(data_dir, variable)
    if port is None:
        return None
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return None
    return port
