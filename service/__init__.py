"""The asyncio runtime of fleetwatch, in packages by pipeline stage.

``profiles/`` builds window profiles in Redis from prediction records,
``detection/`` runs the checks on closed windows, ``alerting/`` turns results
into alerts and incidents, ``cohorts/`` joins labels to predictions for
performance checks, ``paging/`` notifies receivers, ``api/`` and ``ui/`` serve
the HTTP API and the dashboard. At the root: the CLI, the runtime that starts
the roles, settings, metrics, Kafka helpers, the embedded infrastructure, the
model registry (``registry``) and the stored-value codec (``stored``).
"""
