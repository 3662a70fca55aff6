"""The asyncio runtime: settings, Kafka and Redis I/O, aggregator, detector worker, API, CLI."""
