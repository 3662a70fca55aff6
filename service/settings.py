"""All configuration, read from ``FLEETWATCH_*`` environment variables."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, IPvAnyNetwork, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from detectors.policy.silence import MAX_VALUE_LENGTH


class Settings(BaseSettings):
    """fleetwatch settings. Every field is read from ``FLEETWATCH_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix="FLEETWATCH_", extra="ignore", populate_by_name=True)

    kafka_bootstrap: str | None = Field(
        None, description="Kafka bootstrap servers; unset: `run`/`demo` start an embedded broker"
    )
    redis_url: str | None = Field(
        None, description="Redis URL (`redis://host:port/db`, or "
                           "`redis+sentinel://host:port[,host:port]/name[/db]` for a primary behind Redis "
                           "Sentinel: docs/operations.md); unset: `run`/`demo` start an embedded Redis"
    )
    redis_cluster: bool = Field(
        False, description="redis_url names one node of a Redis Cluster (the client finds the others); "
                           "false: a standalone Redis server. Ignored when redis_url is unset (the "
                           "embedded Redis is one server)"
    )
    data_dir: Path = Field(Path(".fleetwatch"), description="Folder for embedded Redis and broker data")
    embedded_broker_storage: Literal["disk", "memory"] = Field(
        "disk", description="Log storage of the embedded broker: disk keeps it in data_dir across restarts "
                            "(Tansu on S3 storage served from files); memory loses it with the process")
    predictions_topic: str = Field("fw.predictions", description="Topic the SDK produces to")
    dead_letter_topic: str = Field("fw.deadletter", description="Topic for rejected records")
    labels_topic: str = Field("fw.labels", description="Topic the SDK produces delayed labels to")
    topic_partitions: int = Field(8, ge=1, description="Partitions when creating topics")
    kafka_enable_idempotence: bool = Field(
        False, description="Idempotent producer (not supported by every broker)"
    )
    aggregator_group: str = Field("fleetwatch-aggregator", description="Aggregator consumer group")
    window_seconds: int = Field(300, ge=1, description="Default window length per model")
    allowed_lateness_seconds: int = Field(
        60, ge=0, description="Event-time lateness before a window closes"
    )
    idle_close_seconds: float = Field(
        360.0, gt=0, description="Close a model's open windows after this long without records"
    )
    backfill_idle_seconds: float = Field(
        10.0, gt=0,
        description="Close a backfilling model's open windows (ModelConfig.backfill) after this long "
                    "without records, once everything sent has been read",
    )
    max_future_seconds: float = Field(
        86_400.0, description="Records with event time further ahead of now are dead-lettered"
    )
    max_clock_skew_seconds: float = Field(
        5.0, ge=0,
        description="A record moves its model's watermark at most this far past the time its message "
                    "was produced (broker timestamp, never later than the aggregator's clock)",
    )
    watermark_messages: int = Field(
        5, ge=1,
        description="A model's watermark is the lower median of its last this many messages' (lower) median "
                    "event times: fewer than half of them cannot move it",
    )
    dead_letter_max_bytes: int = Field(
        1_000_000, ge=4_096, le=1_048_576,
        description="Largest dead letter (key, value, headers); larger ones are truncated, with their "
                    "original size and sha256 in headers (the producer refuses requests over 1 MiB)",
    )
    dead_letter_retry_seconds: float = Field(
        60.0, ge=0,
        description="How long a dead letter whose send fails retriably is retried before it is counted lost",
    )
    checkpoint_interval_seconds: float = Field(
        2.0, gt=0, description="How often the aggregator checkpoints state and offsets to Redis"
    )
    checkpoint_max_share: float = Field(
        0.2, gt=0, le=1,
        description="Longest share of time checkpoints may take: under load the interval stretches to "
        "checkpoint duration / share (at most 10x checkpoint_interval_seconds)",
    )
    log_rewind_confirm_seconds: float = Field(
        2.0, ge=0,
        description="A broker high watermark below the aggregator's checkpointed offset must persist "
                    "this long before the log counts as gone backwards (read again from the earliest offset)",
    )
    max_poll_records: int = Field(5_000, ge=1, description="Kafka records per poll")
    kafka_session_timeout_ms: int = Field(
        10_000, ge=1_000, description="Consumer group session timeout (failure detection)"
    )
    kafka_heartbeat_interval_ms: int = Field(3_000, ge=100, description="Consumer heartbeat interval")
    max_open_windows: int = Field(
        20_000, ge=1, description="Open windows per aggregator partition; beyond it the oldest close early"
    )
    aggregator_blas_threads: int = Field(
        1, ge=1, le=256,
        description="BLAS threads of an aggregator process (the projections of vector features are "
                    "small matrix products, slower on several threads of a busy machine)")
    max_vector_features_per_model: int = Field(
        16, ge=0, le=1_000,
        description="Vector features profiled per model (declared ones always are); more are dropped "
                    "and counted (each costs ~45 KiB per window)")
    max_features_per_model: int = Field(
        500, ge=1, description="Distinct features profiled per model and window; more are dropped and counted"
    )
    implicit_models_per_minute: int = Field(
        1_000, ge=0,
        description="Models the fleet may create implicitly (by records of a model never registered) "
                    "per minute; records of further new models are refused (ingest: 429; Kafka: "
                    "dead-lettered, reason implicit_model_limit). Registered models are unaffected",
    )
    implicit_models_max: int = Field(
        10_000, ge=0,
        description="Models that may ever be created implicitly (0: every model must be registered "
                    "first); beyond it records of new models are refused as above",
    )
    detector_group: str = Field("fleetwatch-detector", description="Detector consumer group")
    detector_reclaim_seconds: float = Field(
        60.0, gt=0,
        description="A closed-window event a detector read but did not finish in this time (it "
                    "stopped or hangs) is taken over by another detector",
    )
    detector_fleet_wait_seconds: float = Field(
        30.0, ge=0,
        description="How long a window of a model's first days (no past day of its kind: the volume "
                    "test's control is the fleet's traffic) waits for every model that closed the "
                    "window before it to close it too; then it is tested with the models that have "
                    "(0: never wait). Keep it below detector_reclaim_seconds",
    )
    joiner_group: str = Field("fleetwatch-joiner", description="Label joiner consumer group")
    performance_eval_interval_seconds: float = Field(
        10.0, gt=0, description="How often the label joiner tests the cohorts that matured"
    )
    retention_window_seconds: int = Field(
        8 * 86_400, ge=3_600, description="How long closed window profiles and their results are kept"
    )
    retention_hourly_seconds: int = Field(
        92 * 86_400, ge=3_600, description="How long 1-hour rollup profiles are kept"
    )
    retention_daily_seconds: int = Field(
        731 * 86_400, ge=86_400, description="How long 1-day rollup profiles are kept"
    )
    psi_floor: float = Field(
        0.02, ge=0,
        description="Default PSI floor: the interval null of PSI tests and their alert floor (0.02: "
                    "a mean moving by ~0.14 sd; what a feature normally moves is its learned floor)"
    )
    js_floor: float = Field(
        0.1, ge=0, description="Default Jensen-Shannon floor: the interval null of JS tests and their floor"
    )
    null_rate_floor: float = Field(
        0.1, ge=0, description="Default null-rate floor: the null-rate change a test must clear"
    )
    pool_min_records: int = Field(
        30, ge=1,
        description="Low traffic: a window with fewer records is tested together with the windows "
                    "before it until it holds this many (the tests' minimum sample, 30)",
    )
    pool_max_windows: int = Field(
        14, ge=1, le=1_000, description="Low traffic: preceding windows a window may be pooled with"
    )
    learned_floor_quantile: float = Field(
        0.99, gt=0, le=1,
        description="Learned floors: the quantile q of a feature's window-to-window movement in its "
                    "reference's windows (minus the same quantile of shuffled windows: sampling noise) "
                    "that its tests' floors rise to when above the configured floor (docs/detectors.md)",
    )
    learned_floor_min_windows: int = Field(
        8, ge=2, description="Learned floors: reference windows (by event time) needed to learn them"
    )
    learned_floor_max_windows: int = Field(
        300, ge=2, description="Learned floors: reference windows tested at most (a seeded sample of them "
                               "when there are more)"
    )
    learned_floor_shuffles: int = Field(
        2, ge=1, le=64,
        description="Learned floors: random partitions of the reference rows into windows of the same "
                    "sizes whose effects measure sampling noise",
    )
    alpha: float = Field(
        0.01, gt=0, lt=1, description="Level at which one test's status reads drift (alerts: the FDR gate)"
    )
    fdr_alpha: float = Field(
        0.05, gt=0, lt=1, description="Target false discovery rate of the fleet's alerts per FDR epoch (q)"
    )
    fdr_performance_share: float = Field(
        0.05, gt=0, le=0.1,
        description="Share of fdr_alpha given to the label-joined performance tests, gated as a family "
                    "of their own with their own slot capacity (the feature and score tests get the "
                    "rest); the union's FDR stays <= fdr_alpha (docs/alerting.md)",
    )
    fdr_epoch_seconds: int = Field(
        86_400, ge=60,
        description="FDR epoch: the guarantee holds per epoch; a multiple of window_seconds",
    )
    fdr_capacity_headroom: float = Field(
        1.25, ge=1, allow_inf_nan=False,
        description="FDR slot capacity = headroom x the most tests the fleet submitted to one slot "
                    "in this or the look-back's previous epochs, or the registered fleet declares "
                    "(models gated within the look-back, and new ones; growth beyond it in one slot goes "
                    "unfunded)",
    )
    fdr_capacity_lookback_epochs: int = Field(
        7, ge=1, le=7,
        description="FDR slot capacity: how many previous epochs' peaks size a slot (7: a week of "
                    "daily epochs, so windows gated out of order or a weekday rhythm find a full peak)",
    )
    fdr_min_tests_per_window: int = Field(
        20, ge=1,
        description="Floor of the derived FDR slot capacity (tests): funds a slot first touched "
                    "with no history (cold start, backfill)",
    )
    fdr_max_tests_per_window: int | None = Field(
        None, ge=1, description="Ceiling of the derived FDR slot capacity (tests); unset: none"
    )
    immediate_effect_ratio: float = Field(
        3.0, ge=1,
        description="A breach pages at its first window (no k-of-m wait) when its effect is at least "
                    "this many times its floor and its p-value at most immediate_p_ratio x the FDR "
                    "gate's level (inf: never)",
    )
    immediate_quality_effect_ratio: float = Field(
        1.0, ge=1,
        description="The same ratio for data-quality breaks (null_rate, type_mismatch, nonfinite, "
                    "out_of_range; inf: never)",
    )
    immediate_p_ratio: float = Field(
        1e-3, gt=0, le=1,
        description="How far below the FDR gate's level a breach's p-value must lie to page at once",
    )
    fdr_reward_lag_windows: int = Field(
        12, ge=1, description="Discoveries raise later levels once this many window slots old"
    )
    listen_host: str = Field(
        "127.0.0.1",
        validation_alias=AliasChoices("listen_host", "FLEETWATCH_LISTEN_HOST", "api_host",
                                      "FLEETWATCH_API_HOST"),
        description="Listen address of every port a role opens: the API and the Prometheus port of "
                    "`aggregate`/`detect`/`join`/`notify`. Loopback by default; containers set "
                    "0.0.0.0 (deploy/). FLEETWATCH_API_HOST is its former name, still read",
    )
    api_port: int = Field(8000, ge=0, le=65535, description="API listen port")
    metrics_port: int = Field(
        0, ge=0, le=65535,
        description="Prometheus port of `aggregate`/`detect`/`join`/`notify` on listen_host (0: none)",
    )
    metrics_token: SecretStr | None = Field(
        None, min_length=32,
        description="Bearer token of Prometheus scrapes (at least 32 characters). With api_auth on, "
                    "the API's /metrics serves series labelled by model (model, feature, effect size) "
                    "only to a scrape that sends it; without it they are never served (docs/api.md)",
    )
    notifier_group: str = Field(
        "fleetwatch-notifier", description="Notifier consumer group on the alert-event stream"
    )
    notifier_max_attempts: int = Field(
        8, ge=1, description="Delivery attempts of a notification before it is dead-lettered"
    )
    notifier_backoff_base_seconds: float = Field(
        2.0, gt=0, description="First retry delay of a delivery; doubles per attempt, plus jitter"
    )
    notifier_backoff_max_seconds: float = Field(
        600.0, gt=0, description="Longest delay between two delivery attempts (before jitter)"
    )
    notifier_request_timeout_seconds: float = Field(
        10.0, gt=0, description="HTTP timeout of one delivery attempt"
    )
    notifier_max_in_flight: int = Field(
        32, ge=1, description="Deliveries one notifier runs at once (a slow receiver holds one each)")
    notifier_lease_seconds: float = Field(
        60.0, gt=0,
        description="A claimed delivery or alert event not finished in this time is taken over "
                    "by another notifier (keep above the request timeout)",
    )
    matcher_regex_max_length: int = Field(
        MAX_VALUE_LENGTH, ge=1, le=MAX_VALUE_LENGTH,
        description="Longest regular expression of a silence or receiver matcher, characters "
                    "(RE2 syntax, matched in linear time; longer ones are answered 422)",
    )
    receiver_allow_nets: list[IPvAnyNetwork] = Field(
        default_factory=list,
        description="Networks receivers may resolve to although private/loopback/... "
                    '(JSON list of CIDRs, e.g. ["10.0.0.0/8"]); default none',
    )

    api_auth: bool = Field(
        False,
        description="Require an API key on every /v1 endpoint (/healthz, /metrics and the OpenAPI "
                    "docs stay open). Off by default so the demo and examples run without keys: "
                    "PRODUCTION MUST TURN IT ON (docs/api.md)",
    )
    api_admin_key: SecretStr | None = Field(
        None, min_length=32,
        description="Bootstrap admin API key (at least 32 characters, e.g. `openssl rand -base64 32`): "
                    "creates the first keys through POST /v1/keys; not stored, rotated by changing it",
    )
    api_retry_after_seconds: int = Field(
        5, ge=1, le=3_600,
        description="Retry-After of the 503 answered while Redis is unavailable, seconds",
    )
    api_max_body_bytes: int = Field(
        16 * 2**20, ge=1_024, description="Largest request body; larger ones are answered 413"
    )
    api_max_reference_body_bytes: int = Field(
        128 * 2**20, ge=1_024,
        description="Largest body of POST /v1/models/{id}/reference (up to 100,000 rows per request)",
    )

    public_url: str | None = Field(
        None, pattern=r"^https?://[^\s/?#]+(/[^\s?#]*)?$",
        description="The dashboard's public base URL (e.g. `https://fleetwatch.example.com`): paging "
                    "payloads link to the incident page under it; unset, they carry no link",
    )
    ui_cookie_secure: bool = Field(
        True, description="Mark the dashboard's cookies Secure (sent over HTTPS only; browsers also send "
                          "them to http://localhost and http://127.0.0.1). Turn off only behind a plain-HTTP "
                          "proxy on a trusted network",
    )
    ui_page_size: int = Field(
        50, ge=5, le=500, description="Models per page of the dashboard's fleet overview")
    ui_recent_windows: int = Field(
        48, ge=2, le=1_000, description="Windows the dashboard's sparklines and effect charts show")

    redis_retry_base_seconds: float = Field(
        0.2, gt=0,
        description="While Redis cannot serve, a role waits this long before its first retry; the wait "
                    "doubles per failed retry up to redis_retry_max_seconds (docs/operations.md)",
    )
    redis_retry_max_seconds: float = Field(
        5.0, gt=0, description="Longest wait between two retries of a role while Redis cannot serve")
    config_ttl_seconds: float = Field(
        30.0, ge=0,
        description="How long the aggregator and the label joiner reuse a model's stored configuration "
                    "(and the aggregator its reference's bin edges) before reading it again: a change "
                    "made through the API takes effect within this time (0: read for every message)",
    )

    @field_validator("metrics_token", mode="before")
    @classmethod
    def _empty_token_is_none(cls, v: object) -> object:
        return None if v == "" else v  # docker-compose.yml passes "" when it is not set

    @model_validator(mode="after")
    def _epoch_of_whole_windows(self) -> Settings:
        if self.fdr_epoch_seconds % self.window_seconds:
            raise ValueError("fdr_epoch_seconds must be a multiple of window_seconds")
        if (self.fdr_max_tests_per_window is not None
                and self.fdr_max_tests_per_window < self.fdr_min_tests_per_window):
            raise ValueError("fdr_max_tests_per_window must be >= fdr_min_tests_per_window")
        return self


ENV_PREFIX = "FLEETWATCH_"


def environment(settings: Settings, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child process that reads back ``settings``: ``base`` (default
    ``os.environ``) without its ``FLEETWATCH_*`` variables, plus one ``FLEETWATCH_<FIELD>``
    per setting that is not None (lists and mappings as JSON, secrets in clear).

    Parameters
    ----------
    settings : Settings
    base : mapping, optional
        The variables to start from (``os.environ`` when None).

    Returns
    -------
    dict[str, str]
        ``Settings()`` in a process with this environment equals ``settings``.

    Examples
    --------
    >>> s = Settings(window_seconds=3600, redis_url="redis://x:1/0", api_admin_key="k" * 32)
    >>> env = environment(s, base={"PATH": "/bin", "FLEETWATCH_ALPHA": "0.5"})
    >>> env["PATH"], env["FLEETWATCH_WINDOW_SECONDS"], env["FLEETWATCH_RECEIVER_ALLOW_NETS"]
    ('/bin', '3600', '[]')
    >>> env["FLEETWATCH_ALPHA"], env["FLEETWATCH_API_ADMIN_KEY"] == "k" * 32
    ('0.01', True)
    """
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items() if not k.startswith(ENV_PREFIX)}
    dumped = settings.model_dump(mode="json")
    for name, value in dumped.items():
        raw = getattr(settings, name)
        if raw is None:
            continue
        if isinstance(raw, SecretStr):
            value = raw.get_secret_value()
        env[f"{ENV_PREFIX}{name.upper()}"] = (json.dumps(value) if isinstance(value, list | dict)
                                             else str(value))
    return env
