"""Prediction and label logging clients: :class:`Client` for threaded servers,
:class:`AsyncClient` for asyncio servers. Same API, same machinery: a bounded
buffer filled by the caller and a worker thread with its own event loop and
Kafka producer (so encoding and compression never run on the server's loop).

The calling side does almost nothing: ``log_prediction`` copies the features
dict, appends one tuple to a ``deque`` and returns. Validation, prediction
ids, sampling, the PII policy, batching, encoding and compression happen on
the worker. Nothing raises into the caller and nothing blocks it; every
record that is not delivered is counted in :class:`~sdk.stats.ClientStats`
by reason.

Drop policy
-----------
- ``buffer_full``: the buffer holds ``max_buffer`` predictions logged one by
  one (another ``max_buffer`` in columnar chunks, another ``max_buffer``
  labels); a new record is dropped at once (newest dropped: what is buffered
  is kept for delivery) and ``log_*`` returns False / 0. The buffer fills
  when the broker is slow or down: the worker waits for each drain's
  acknowledgements before it drains again.
- ``invalid``: the record violates the contract (logged once per field).
- ``send_failed``: the broker did not acknowledge within ``delivery_timeout_ms``.
- ``closed``: logged after ``close()``, or still unsent when ``close()``
  (or the flush at interpreter exit) ran out of time.

Sampled-out records (``sample_rates``) are counted as ``sampled_out``, not dropped.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping, Sequence
from time import time
from typing import Any

from sdk import lifecycle, prometheus
from sdk.batching import Batcher
from sdk.buffer import Buffer
from sdk.columns import RecordColumns
from sdk.pii import PiiPolicy
from sdk.sampling import Sampler
from sdk.stats import BUFFER_FULL, CLOSED, INVALID, LABELS, PREDICTIONS, ClientStats
from sdk.tabular import column_list, feature_columns
from sdk.worker import Delivery, Worker, resolve_compression

log = logging.getLogger("fleetwatch.sdk")

DEFAULT_TOPIC = "fw.predictions"
DEFAULT_LABELS_TOPIC = "fw.labels"
_NOT_A_MAPPING = (PREDICTIONS, INVALID, 1, "features must be a mapping of name -> value")
# Workers inherited from the parent by a forked child are kept alive, never used:
# finalizing them could touch connections the child shares with the parent.
_ABANDONED: list[Worker] = []


def _env_bool(name: str, value: str) -> bool:
    """A boolean environment value, read as the service's settings read it."""
    v = value.strip().lower()
    if v in ("1", "true", "yes", "on", "y", "t"):
        return True
    if v in ("0", "false", "no", "off", "n", "f"):
        return False
    raise ValueError(f"{name}={value!r} is not a boolean (true/false, 1/0, yes/no, on/off)")


class _BaseClient:
    """What both clients share: configuration, the logging calls and the stats.

    Parameters
    ----------
    bootstrap_servers : str
        Kafka bootstrap servers, ``host:port[,host:port]``.
    topic : str
        Predictions topic.
    labels_topic : str
        Labels topic.
    max_buffer : int
        Records held in memory at most (see the drop policy above).
    batch_size : int
        Records per Kafka message at most.
    linger_ms : float
        How long a record may wait in the buffer before its batch is sent
        (a full batch is sent at once).
    max_message_bytes : int
        Encoded bytes per Kafka message at most (a larger batch is split);
        keep it under the broker's ``message.max.bytes``.
    compression_type : str or None
        ``"auto"`` (lz4 when ``cramjam`` is installed, else gzip), ``"gzip"``,
        ``"lz4"``, ``"zstd"``, ``"snappy"`` or None.
    enable_idempotence : bool
        Kafka idempotent producer (off by default: not every broker supports it).
    delivery_timeout_ms : int
        How long the broker has to acknowledge a message before its records
        are dropped (``send_failed``).
    sample_rates : Mapping[str, float], optional
        ``model_id -> share of predictions kept``, decided by a hash of the
        prediction id (:mod:`sdk.sampling`); labels follow their predictions.
    default_sample_rate : float
        Rate of models not in ``sample_rates``.
    pii : PiiPolicy, optional
        Features to drop or to replace by a keyed hash before anything leaves
        the process.
    close_timeout : float
        Seconds ``close()`` (and the flush at interpreter exit) may spend
        delivering what is buffered.

    Raises
    ------
    ValueError
        On a bad parameter (the only time a client raises).
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str = DEFAULT_TOPIC,
        *,
        labels_topic: str = DEFAULT_LABELS_TOPIC,
        max_buffer: int = 100_000,
        batch_size: int = 1_000,
        linger_ms: float = 100.0,
        max_message_bytes: int = 1_000_000,
        compression_type: str | None = "auto",
        enable_idempotence: bool = False,
        delivery_timeout_ms: int = 30_000,
        sample_rates: Mapping[str, float] | None = None,
        default_sample_rate: float = 1.0,
        pii: PiiPolicy | None = None,
        close_timeout: float = 10.0,
    ) -> None:
        if batch_size < 1 or max_buffer < 1 or linger_ms < 0 or max_message_bytes < 1:
            raise ValueError("batch_size, max_buffer and max_message_bytes must be positive, linger_ms >= 0")
        self._delivery = Delivery(
            bootstrap_servers, topic, labels_topic, linger_ms, batch_size, max_message_bytes,
            resolve_compression(compression_type), enable_idempotence, delivery_timeout_ms,
        )
        self._sampler = Sampler(sample_rates, default_sample_rate)
        self._pii = pii
        self._max_buffer = max_buffer
        self.close_timeout = close_timeout
        self._worker: Worker | None = None
        self._closed = False
        self._reset_buffer()
        lifecycle.track(self)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **options: Any):
        """A client configured by the ``FLEETWATCH_*`` variables the service reads.

        ``FLEETWATCH_KAFKA_BOOTSTRAP`` (required), ``FLEETWATCH_PREDICTIONS_TOPIC``,
        ``FLEETWATCH_LABELS_TOPIC`` and ``FLEETWATCH_KAFKA_ENABLE_IDEMPOTENCE``; ``fleetwatch
        run`` prints the ``export`` lines and writes them to ``<data dir>/endpoints.env``.

        Parameters
        ----------
        environ : Mapping[str, str], optional
            Where to read the variables (default ``os.environ``).
        **options
            Any other parameter of the client (they win over the environment).

        Raises
        ------
        ValueError
            If ``FLEETWATCH_KAFKA_BOOTSTRAP`` is unset or empty, or a variable holds a bad value.

        Examples
        --------
        >>> fw = Client.from_env({"FLEETWATCH_KAFKA_BOOTSTRAP": "127.0.0.1:9092"})
        >>> fw._delivery.bootstrap_servers, fw._delivery.topic
        ('127.0.0.1:9092', 'fw.predictions')
        """
        env = os.environ if environ is None else environ
        bootstrap = env.get("FLEETWATCH_KAFKA_BOOTSTRAP", "").strip()
        if not bootstrap:
            raise ValueError("FLEETWATCH_KAFKA_BOOTSTRAP is not set: export the lines `fleetwatch run` "
                             "prints (also in <data dir>/endpoints.env), or pass bootstrap_servers")
        kwargs: dict[str, Any] = {}
        if topic := env.get("FLEETWATCH_PREDICTIONS_TOPIC"):
            kwargs["topic"] = topic
        if labels := env.get("FLEETWATCH_LABELS_TOPIC"):
            kwargs["labels_topic"] = labels
        if (idem := env.get("FLEETWATCH_KAFKA_ENABLE_IDEMPOTENCE")) is not None:
            kwargs["enable_idempotence"] = _env_bool("FLEETWATCH_KAFKA_ENABLE_IDEMPOTENCE", idem)
        return cls(bootstrap, **{**kwargs, **options})

    def _reset_buffer(self) -> None:
        """A new empty buffer and stats; the hot path reads them from attributes of self."""
        self._buffer = Buffer(self._max_buffer, self._delivery.batch_size)
        self._stats = ClientStats()
        self._rows, self._chunks, self._labels = self._buffer.rows, self._buffer.chunks, self._buffer.labels
        self._drops = self._buffer.drops
        self._max_rows, self._max_chunks = self._buffer.max_rows, self._buffer.max_chunks
        self._max_labels = self._buffer.max_labels
        self._refusal = BUFFER_FULL
        self._row_refused = (PREDICTIONS, BUFFER_FULL, 1, None)
        self._label_refused = (LABELS, BUFFER_FULL, 1, None)

    # -- logging (the caller's side: never blocks, never raises) -------------------------
    def log_prediction(
        self,
        model_id: str,
        features: Mapping[str, Any],
        *,
        model_version: str = "0",
        prediction_id: str | None = None,
        event_time: float | None = None,
        score: float | None = None,
        class_probabilities: Mapping[str, float] | None = None,
        predicted_label: Any = None,
        slices: Mapping[str, str] | None = None,
        latency_ms: float | None = None,
    ) -> bool:
        """Buffer one prediction for delivery; returns at once and never raises.

        Parameters are the fields of :class:`sdk.record.PredictionRecord`;
        ``prediction_id`` defaults to an id unique to this process (pass your
        own to join labels), ``event_time`` to now (Unix seconds). The
        features dict is copied; ``slices`` and ``class_probabilities`` are
        not (do not change them after the call).

        Returns
        -------
        bool
            False if the record was dropped at once (buffer full, client
            closed, features not a mapping).
        """
        rows = self._rows
        if len(rows) < self._max_rows:
            try:
                features = dict(features)
            except Exception:
                self._drops.append(_NOT_A_MAPPING)
                return False
            rows.append((model_id, features, model_version, prediction_id,
                         time() if event_time is None else event_time, score, class_probabilities,
                         predicted_label, slices, latency_ms))
            return True
        self._drops.append(self._row_refused)
        return False

    def log_predictions(
        self,
        model_id: str,
        features: Any,
        *,
        feature_names: Sequence[str] | None = None,
        model_version: str = "0",
        prediction_ids: Any = None,
        event_times: Any = None,
        scores: Any = None,
        class_probabilities: Sequence[Mapping[str, float] | None] | None = None,
        predicted_labels: Any = None,
        slices: Any = None,
        latency_ms: Any = None,
    ) -> int:
        """Buffer a batch of predictions of one model, given as columns; never raises.

        Parameters
        ----------
        model_id : str
        features : pandas.DataFrame, mapping of name -> 1-D array/sequence, or 2-D numpy array
            One row per prediction. A 2-D array needs ``feature_names``.
        feature_names : sequence of str, optional
        model_version : str
            One version for the batch.
        prediction_ids, event_times, scores, predicted_labels, latency_ms : 1-D array or sequence, optional
            One value per row. ``event_times`` defaults to now for every row,
            ``prediction_ids`` to ids unique to this process.
        class_probabilities : sequence of mappings, optional
        slices : pandas.DataFrame or mapping of key -> 1-D array/sequence of str, optional

        Returns
        -------
        int
            Records buffered (0 if the batch was dropped: malformed, buffer full,
            client closed).

        Notes
        -----
        The columns are converted to Python lists here (numpy/pandas arrays may
        be reused by the caller after the call); no per-record object is built.
        pandas missing values become None.
        """
        n = 0
        try:
            cols = feature_columns(features, feature_names)
            given = {name: column_list(values) for name, values in (
                ("prediction_ids", prediction_ids), ("event_times", event_times), ("scores", scores),
                ("class_probabilities", class_probabilities), ("predicted_labels", predicted_labels),
                ("latency_ms", latency_ms)) if values is not None}
            slice_cols = {} if slices is None else feature_columns(slices)
            lengths = {len(c) for c in (*cols.values(), *given.values(), *slice_cols.values())}
            n = max(lengths, default=0)
            if len(lengths) > 1:
                raise ValueError(f"columns differ in length: {sorted(lengths)}")
            chunk = RecordColumns(
                model_id, [model_version] * n, given.get("prediction_ids") or [None] * n,
                given.get("event_times") or [time()] * n, cols, given.get("scores"),
                given.get("class_probabilities"), given.get("predicted_labels"), slice_cols,
                given.get("latency_ms"),
            )
        except Exception as exc:
            self._drops.append((PREDICTIONS, INVALID, n, f"log_predictions: {exc}"))
            return 0
        step = self._delivery.batch_size
        accepted = 0
        for start in range(0, n, step):
            piece = chunk if n <= step else chunk.take(range(start, min(start + step, n)))
            if len(self._chunks) < self._max_chunks:
                self._chunks.append(piece)
                accepted += len(piece)
            else:
                self._drops.append((PREDICTIONS, self._refusal, len(piece), None))
        return accepted

    def log_label(
        self, model_id: str, prediction_id: str, label: Any, event_time: float | None = None
    ) -> bool:
        """Buffer the ground truth of an earlier prediction; never raises.

        Parameters
        ----------
        model_id : str
        prediction_id : str
            The id the prediction was logged with.
        label : bool, int, float or str
        event_time : float, optional
            When the label became known (Unix seconds); default now.

        Returns
        -------
        bool
            False if the label was dropped at once (buffer full, client closed).
        """
        labels = self._labels
        if len(labels) < self._max_labels:
            labels.append((model_id, prediction_id, label, time() if event_time is None else event_time))
            return True
        self._drops.append(self._label_refused)
        return False

    @property
    def stats(self) -> ClientStats:
        """A snapshot of the counters: accepted, sent, sampled out, dropped by reason, buffered."""
        self._buffer.collect_drops(self._stats)
        snap = self._stats.snapshot()
        preds, labels = self._buffer.pending()
        snap.accepted += preds
        snap.buffered += preds
        snap.labels.accepted += labels
        snap.labels.buffered += labels
        return snap

    # -- life cycle (shared by both facades) --------------------------------------------
    def _start(self) -> None:
        if self._worker is not None or self._closed:
            return
        batcher = Batcher(self._delivery.batch_size, self._delivery.max_message_bytes, self._sampler,
                          self._pii)
        self._worker = Worker(self._buffer, self._stats, batcher, self._delivery)
        self._worker.start()
        lifecycle.started(self)
        prometheus.export(self)

    def _flush(self, timeout: float) -> bool:
        worker = self._worker
        return worker is not None and worker.call(worker.flush(), timeout)

    def _close(self, timeout: float) -> None:
        if self._closed:
            return
        self._closed = True
        lifecycle.closed(self)
        self._max_rows = self._max_chunks = self._max_labels = 0
        self._refusal = CLOSED
        self._row_refused = (PREDICTIONS, CLOSED, 1, None)
        self._label_refused = (LABELS, CLOSED, 1, None)
        worker = self._worker
        if worker is not None and worker.call(worker.shutdown(timeout), timeout + 5.0):
            worker.thread.join(timeout=5.0)
            return
        self._buffer.discard(self._stats)  # no worker (never started, or it did not answer)

    def _after_fork(self) -> None:
        """In a forked child: forget the parent's buffer and worker; restart if started."""
        was_running = self._worker is not None and not self._closed
        if self._worker is not None:
            _ABANDONED.append(self._worker)
        self._worker = None
        self._reset_buffer()
        if was_running:
            self._start()


class Client(_BaseClient):
    """Prediction and label logger for synchronous (thread-based) model servers.

    Takes the parameters of :class:`_BaseClient`. Its worker is a daemon
    thread with its own event loop; ``flush`` is safe to call from a signal
    handler (see :func:`sdk.lifecycle.flush_on_signals`).

    Examples
    --------
    >>> with Client("localhost:9092") as fw:                # doctest: +SKIP
    ...     fw.log_prediction("churn", {"tenure": 14, "plan": "pro"}, score=0.31,
    ...                       prediction_id=request_id)
    ...     fw.log_label("churn", request_id, True)
    """

    def start(self) -> None:
        """Start the worker; returns at once and never raises (it connects in the
        background, retrying while the broker is unreachable)."""
        self._start()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything logged so far is delivered or dropped; never raises.

        Returns
        -------
        bool
            False if ``timeout`` seconds passed first (or the client is not running).
        """
        return self._flush(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Flush for at most ``timeout`` seconds (default ``close_timeout``), then stop
        the producer and the worker; never raises."""
        self._close(self.close_timeout if timeout is None else timeout)

    def __enter__(self) -> Client:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(_BaseClient):
    """Prediction and label logger for asyncio model servers.

    Takes the parameters of :class:`_BaseClient`. Logging calls are plain
    (non-async) methods; the worker runs on its own thread and event loop, so
    batching, encoding and compression never block the server's loop.

    Examples
    --------
    >>> async def serve():                                   # doctest: +SKIP
    ...     async with AsyncClient("localhost:9092") as fw:
    ...         fw.log_prediction("fraud-v2", {"amount": 12.5}, score=0.07)
    """

    async def start(self) -> None:
        """Start the worker; never raises (it connects in the background)."""
        self._start()

    async def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything logged so far is delivered or dropped; never raises.

        Returns
        -------
        bool
            False if ``timeout`` seconds passed first (or the client is not running).
        """
        worker = self._worker
        if worker is None:
            return False
        future = worker.submit(worker.flush())
        try:
            await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        except Exception:
            return False
        return True

    async def close(self, timeout: float | None = None) -> None:
        """Flush for at most ``timeout`` seconds (default ``close_timeout``), then stop
        the producer and the worker; never raises."""
        await asyncio.to_thread(self._close, self.close_timeout if timeout is None else timeout)

    async def __aenter__(self) -> AsyncClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
