"""The HTTP API under ``/v1``: routers, API keys, and what only the API reads.

This package owns the FastAPI application. Each router serves one resource
(models, reference, profiles, alerts, incidents, drift, performance,
receivers, silences, keys, ingest, flush, status) and declares the typed
answer of each route; ``deps`` holds what routes depend on (the settings, the
stores, the caller's key) as ``Annotated`` aliases, and ``require_model``; ``auth``
checks API keys and their scopes; ``summary`` and ``alert_metrics`` compute
what the API and its ``/metrics`` show but no worker needs. Routers read the
stores of the other packages and never a worker role (tests/test_layering.py);
the drift routes evaluate a window on demand with :mod:`service.profiles.evaluation`,
as the detector does.
"""
