"""The HTTP API under ``/v1``: routers, API keys, and what only the API reads.

This package owns the FastAPI application. Each router serves one resource
(models, alerts, incidents, drift, performance, receivers, silences, keys,
ingest, flush, status); ``deps`` holds what routes depend on (the stores,
the caller's key, ``require_model``) as ``Annotated`` aliases; ``auth``
checks API keys and their scopes; ``summary`` and ``alert_metrics`` compute
what the API and its ``/metrics`` show but no worker needs. Routers read the
stores of the other packages; the drift routes evaluate a window on demand
with the detector's functions.
"""
