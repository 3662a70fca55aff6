"""Service roles as separate OS processes (for crash, scale-out and signal tests)."""

from __future__ import annotations

import subprocess
import sys

from service.runtime.roles import role
from service.settings import Settings, environment


def role_process(settings: Settings, name: str, log_path=None) -> subprocess.Popen:
    """Start ``fleetwatch <command>`` of the role ``name`` (a role's name or command, see
    :data:`service.runtime.roles.ROLES`) configured by ``settings`` (every setting, through
    :func:`service.settings.environment`)."""
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    return subprocess.Popen([sys.executable, "-m", "service.cli", role(name).command, "-v"],
                            env=environment(settings), stdout=out, stderr=subprocess.STDOUT)
