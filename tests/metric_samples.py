"""Read this process's Prometheus samples through prometheus_client's public registry."""

from __future__ import annotations

from prometheus_client import REGISTRY


def sample(name: str, **labels: str) -> float:
    """The value of the sample ``name`` (with the counter's ``_total``) with ``labels``; 0 when
    it was never incremented."""
    return REGISTRY.get_sample_value(name, labels) or 0.0
