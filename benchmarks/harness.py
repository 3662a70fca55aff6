"""Shared benchmark plumbing: embedded broker and Redis, aggregator processes,
reading their Prometheus metrics."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families


def role(command: str, env: dict[str, str], metrics_port: int, log: Path | None = None) -> subprocess.Popen:
    """A `fleetwatch <command>` process (aggregate, detect, join, ...) exposing metrics on
    ``metrics_port``; its standard error goes to ``log`` when given."""
    full = dict(os.environ, **env, FLEETWATCH_METRICS_PORT=str(metrics_port))
    with open(log or os.devnull, "ab") as err:
        return subprocess.Popen([sys.executable, "-m", "service.cli", command], env=full,
                                stdout=subprocess.DEVNULL, stderr=err)


def aggregator(env: dict[str, str], metrics_port: int) -> subprocess.Popen:
    """A `fleetwatch aggregate` process exposing metrics on ``metrics_port``."""
    return role("aggregate", env, metrics_port)


def metric(port: int, name: str) -> float:
    """Sum of a metric's samples on a process's /metrics (0 if unreachable)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
            text = resp.read().decode()
    except OSError:
        return 0.0
    for family in text_string_to_metric_families(text):
        if family.name == name:
            return sum(s.value for s in family.samples if not s.name.endswith("_created"))
    return 0.0


def counter(port: int, name: str) -> float | None:
    """A counter's value (``name`` without ``_total``) on a process's /metrics, None if
    unreachable. Asks only for that counter (``?name[]=``), so the process renders one
    sample instead of its whole registry: ~0.35 ms of its CPU per call instead of ~1.8 ms."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics?name[]={name}_total",
                                    timeout=2) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    for family in text_string_to_metric_families(text):
        if family.name == name:
            return sum(s.value for s in family.samples if s.name == name + "_total")
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process, its exited threads included
    (/proc/<pid>/stat; clock-tick resolution, usually 10 ms)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_bytes(pid: int) -> int:
    """Peak resident set size of a live process (VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("VmHWM not found")
