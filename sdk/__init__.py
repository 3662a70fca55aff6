"""fleetwatch telemetry SDK: the prediction record contract and the client.

Importing this package pulls only the standard library, ``msgpack`` and (lazily,
when a client starts) ``aiokafka``; never FastAPI, Redis or datasketches.
"""

from sdk.client import AsyncClient, Client, ClientStats
from sdk.record import SCHEMA_VERSION, PredictionRecord, RecordError, validate_record
from sdk.reference import upload_reference

__all__ = [
    "SCHEMA_VERSION",
    "AsyncClient",
    "Client",
    "ClientStats",
    "PredictionRecord",
    "RecordError",
    "upload_reference",
    "validate_record",
]
