"""The simulator's child processes: two ``fleetwatch detect`` replicas of one consumer group
and one ``fleetwatch join``, started from the role registry and stopped gracefully."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from service.runtime.roles import role
from service.settings import Settings, environment

#: Roles run as child processes (two ``fleetwatch detect`` replicas of one consumer group,
#: one ``fleetwatch join``), the way the service scales out; the aggregator, the API and the
#: simulated model servers run in this one. Every core gets work.
CHILD_ROLES = ("detector", "detector", "joiner")


class RoleProcesses:
    """The child processes of :data:`CHILD_ROLES`; stopped with SIGTERM (graceful)."""

    def __init__(self, settings: Settings, log_dir: Path) -> None:
        self.settings = settings
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen] = []

    def start(self) -> None:
        env = environment(self.settings)
        for i, name in enumerate(CHILD_ROLES):
            log = open(self.log_dir / f"{name}-{i}.log", "ab")  # noqa: SIM115 (owned by the child)
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "service.cli", role(name).command], env=env, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True))

    def check(self) -> None:
        """Raise if a role process died (its log is in the run's data folder)."""
        for i, (name, p) in enumerate(zip(CHILD_ROLES, self.procs, strict=True)):
            if p.poll() is not None:
                tail = (self.log_dir / f"{name}-{i}.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"`fleetwatch {role(name).command}` exited with code "
                                   f"{p.returncode}:\n{tail}")

    def stop(self, timeout: float = 30.0) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()  # SIGTERM: the roles drain, flush and commit
        for p in self.procs:
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
