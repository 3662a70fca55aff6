"""Service roles as separate OS processes (for crash, scale-out and signal tests)."""

from __future__ import annotations

import os
import subprocess
import sys

from service.settings import Settings

_FIELDS = (
    "kafka_bootstrap", "redis_url", "predictions_topic", "dead_letter_topic", "aggregator_group",
    "detector_group", "checkpoint_interval_seconds", "idle_close_seconds",
    "allowed_lateness_seconds", "kafka_session_timeout_ms", "kafka_heartbeat_interval_ms",
    "topic_partitions", "metrics_port",
)


def role_process(settings: Settings, role: str, log_path=None) -> subprocess.Popen:
    """Start ``fleetwatch <role>`` configured by ``settings`` (through FLEETWATCH_* variables)."""
    env = dict(os.environ)
    for name in _FIELDS:
        env[f"FLEETWATCH_{name.upper()}"] = str(getattr(settings, name))
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    return subprocess.Popen([sys.executable, "-m", "service.cli", role, "-v"], env=env,
                            stdout=out, stderr=subprocess.STDOUT)
