"""fleetwatch telemetry SDK: the prediction and label contracts and the clients.

Importing this package pulls only the standard library, ``msgpack`` and (lazily,
when a client is created) ``aiokafka``; never FastAPI, Redis, datasketches or
numpy. ``prometheus_client`` is used when the host process has it installed.
"""

from sdk.client import AsyncClient, Client
from sdk.lifecycle import flush_on_signals
from sdk.pii import PiiPolicy
from sdk.record import SCHEMA_VERSION, PredictionRecord, RecordError, validate_record
from sdk.reference import upload_reference
from sdk.registry import FEATURE_TYPES, FeatureSpec, PerformanceSpec, PersistenceSpec, register_model
from sdk.sampling import Sampler, sample_point
from sdk.stats import ClientStats, StreamStats

__all__ = [
    "FEATURE_TYPES",
    "SCHEMA_VERSION",
    "AsyncClient",
    "Client",
    "ClientStats",
    "FeatureSpec",
    "PerformanceSpec",
    "PersistenceSpec",
    "PiiPolicy",
    "PredictionRecord",
    "RecordError",
    "Sampler",
    "StreamStats",
    "flush_on_signals",
    "register_model",
    "sample_point",
    "upload_reference",
    "validate_record",
]
