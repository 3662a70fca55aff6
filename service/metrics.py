"""Prometheus metrics of this process (default registry).

Label values are bounded: ``reason`` takes the fixed values of
:data:`DEAD_LETTER_REASONS`, ``check`` the detector names.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from sdk.errors import WIRE_REASONS
from sdk.record import RECORD_REASONS
from sdk.vectors import VECTOR_DROP_REASONS

LATE = "late"
FUTURE_EVENT_TIME = "future_event_time"
KEY_MISMATCH = "key_mismatch"
MISSING_KEY = "missing_key"
IMPLICIT_MODEL_LIMIT = "implicit_model_limit"
DEAD_LETTER_REASONS = WIRE_REASONS + RECORD_REASONS + (LATE, FUTURE_EVENT_TIME, KEY_MISMATCH, MISSING_KEY,
                                                       IMPLICIT_MODEL_LIMIT) + VECTOR_DROP_REASONS

RECORDS_CONSUMED = Counter(
    "fleetwatch_records_consumed_total", "Prediction records decoded from Kafka"
)
RECORDS_AGGREGATED = Counter(
    "fleetwatch_records_aggregated_total",
    "Prediction records added to window profiles (records replayed after a rebalance or a fenced "
    "checkpoint count again)"
)
RECORDS_CHECKPOINTED = Counter(
    "fleetwatch_records_checkpointed_total",
    "Prediction records added to window profiles whose checkpoint was written (exactly once across "
    "rebalances: records a lost or fenced checkpoint held are counted by the process that replays them)"
)
MESSAGES_CONSUMED = Counter("fleetwatch_messages_consumed_total", "Kafka messages consumed")
LOG_DISCONTINUITIES = Counter(
    "fleetwatch_log_discontinuities_total",
    "Partitions whose broker log no longer continues the aggregator's checkpoint (shorter: it ends "
    "before the checkpointed offset; replaced: the checkpoint's last message is gone; gap: it starts "
    "after the checkpointed offset)",
    ["reason"],
)
DEAD_LETTERED = Counter(
    "fleetwatch_records_dead_lettered_total",
    "Records (or whole undecodable messages) sent to the dead-letter topic",
    ["reason"],
)
DEAD_LETTERS_TRUNCATED = Counter(
    "fleetwatch_dead_letters_truncated_total",
    "Dead letters cut to fit the producer's request limit (headers keep the original size and sha256)",
)
DEAD_LETTER_SEND_FAILURES = Counter(
    "fleetwatch_dead_letter_send_failures_total", "Failed attempts to send a dead letter (logged)"
)
DEAD_LETTERS_LOST = Counter(
    "fleetwatch_dead_letters_lost_total",
    "Dead letters given up on: not retriable, or still failing after dead_letter_retry_seconds",
)
WINDOWS_CLOSED = Counter("fleetwatch_windows_closed_total", "Window profiles closed and stored")
WINDOWS_REPUBLISHED = Counter(
    "fleetwatch_windows_republished_total",
    "Closed windows stored again by the next checkpoint because their model's keys lost them "
    "(a Redis Cluster failover before replication)",
)
CHECKPOINTS_ROLLED_BACK = Counter(
    "fleetwatch_checkpoints_rolled_back_total",
    "Partition checkpoints found older than the aggregator wrote them (a failover before replication), "
    "rewritten whole",
)
OPEN_WINDOWS = Gauge("fleetwatch_open_windows", "Window profiles held open by this aggregator")
LOOKS_PUBLISHED = Counter(
    "fleetwatch_looks_published_total",
    "Looks at open windows published for the detector's data-quality tests mid-window",
)
LOOKS_DROPPED = Counter(
    "fleetwatch_looks_dropped_total",
    "Looks at open windows not published because Redis could not serve (their windows' closes decide)",
)
LOOKS_TESTED = Counter(
    "fleetwatch_looks_tested_total",
    "Looks at open windows the detector tested, by outcome (fired: raised or updated an alert; "
    "quiet; applied: the policy had applied the window's close; behind: the policy had not applied "
    "the model's earlier windows within FLEETWATCH_DETECTOR_FLEET_WAIT_SECONDS; no_gated_window: "
    "no level yet; unusable: no baseline, or an event that does not parse)",
    ["outcome"],
)
WINDOWS_FLUSHED = Counter(
    "fleetwatch_windows_flushed_total", "Open windows closed by a flush request (POST /v1/models/{id}/flush)"
)
WINDOWS_CLOSED_EARLY = Counter(
    "fleetwatch_windows_closed_early_total",
    "Windows closed before their watermark because the open-window cap was reached",
)
SLICE_RECORDS_CAPPED = Counter(
    "fleetwatch_slice_records_capped_total",
    "Records of closed windows profiled under __other__ because their slice key hit its value cap",
)
FEATURES_DROPPED = Counter(
    "fleetwatch_feature_values_dropped_total",
    "Feature values not profiled because the model reached its feature cap",
)
CONSUMER_LAG = Gauge(
    "fleetwatch_consumer_lag_records", "Records behind the partition's high watermark", ["partition"]
)
CHECKPOINT_SECONDS = Histogram(
    "fleetwatch_checkpoint_duration_seconds", "Time to write an aggregator checkpoint to Redis"
)
CHECKPOINT_ROUNDS = Counter(
    "fleetwatch_checkpoint_rounds", "Aggregator checkpoint rounds (every partition it owns, once each)"
)
CHECKPOINT_CPU_SECONDS = Counter(
    "fleetwatch_checkpoint_cpu_seconds",
    "CPU time of the aggregator's checkpoint rounds, in its event-loop thread (serializing open "
    "windows, publishing closed ones); the rest of its CPU is per record",
)
CHECKPOINT_INTERVAL = Gauge(
    "fleetwatch_checkpoint_interval_seconds", "Current aggregator checkpoint interval (stretches under load)"
)
REDIS_ERRORS = Counter("fleetwatch_redis_errors_total", "Failed Redis operations (retried)")
DETECTOR_RUNS = Counter("fleetwatch_detector_windows_total", "Windows evaluated by the detector")
DETECTOR_SECONDS = Histogram(
    "fleetwatch_detector_window_duration_seconds", "Time to evaluate one window"
)
JOINED_PREDICTIONS = Counter(
    "fleetwatch_joined_predictions_total", "Predictions stored for the label join (sampled, tier 1)"
)
LABEL_OUTCOMES = ("joined", "relabeled", "duplicate", "unknown", "late", "invalid", "not_monitored")
LABELS = Counter("fleetwatch_labels_total", "Labels consumed, by what became of them", ["outcome"])
COHORTS_EVALUATED = Counter(
    "fleetwatch_cohorts_evaluated_total", "Matured label cohorts tested against their baseline"
)
COHORTS_REJUDGED = Counter(
    "fleetwatch_cohorts_rejudged_total",
    "Label cohorts judged again after an insufficient_data verdict, once more labels arrived",
)
ROLLUPS_WRITTEN = Counter(
    "fleetwatch_rollups_written_total", "Rollup profiles written", ["granularity"]
)
DETECTOR_SKIPPED = Counter(
    "fleetwatch_detector_windows_skipped_total", "Windows not evaluated", ["reason"]
)
DETECTOR_READ_ERRORS = Counter(
    "fleetwatch_detector_read_errors_total",
    "Reads of the window-event stream that failed with an error answer (not an outage: e.g. the "
    "stream or its consumer group was deleted); the detector creates the group again and goes on",
)
DETECTOR_WAITING = Gauge(
    "fleetwatch_detector_windows_waiting",
    "Windows of models' first days this detector holds until the fleet has closed them too (the "
    "volume test's control), and looks at open windows it holds until the alert policy has applied "
    "their model's earlier windows",
)
DETECTOR_RELEASE_FAILURES = Counter(
    "fleetwatch_detector_release_failures_total",
    "Windows the alert policy failed on that could not be released either (they stay pending)",
)
ALERTS_RAISED = Counter(
    "fleetwatch_alerts_raised_total", "Alerts fired (episodes)", ["check", "severity"]
)
ALERT_EVIDENCE = Counter(
    "fleetwatch_alert_evidence_total", "Breaching windows added to alerts already firing"
)
ALERTS_RESOLVED = Counter("fleetwatch_alerts_resolved_total", "Alerts auto-resolved")
ALERTS_SUPPRESSED = Counter(
    "fleetwatch_alerts_suppressed_total", "Alerts fired but not to be notified", ["reason"]
)
# The FDR gate's series, per family of tests (``features``: the detector's; ``performance``:
# the label joiner's), which `fleetwatch run` gates in one process.
FDR_FAMILIES = ("features", "performance")
FDR_TESTS = Counter("fleetwatch_fdr_tests_total", "P-values submitted to the FDR gate", ["family"])
FDR_DISCOVERIES = Counter("fleetwatch_fdr_discoveries_total", "P-values the FDR gate discovered",
                          ["family"])
FDR_TESTS_UNFUNDED = Counter(
    "fleetwatch_fdr_tests_unfunded_total",
    "P-values beyond the slot's capacity (derived from the fleet's submissions): not funded",
    ["family"],
)
FDR_CAPACITY = Gauge(
    "fleetwatch_fdr_capacity", "Capacity (tests) of the FDR slot of the last window gated", ["family"]
)
FDR_ALPHA_WEALTH = Gauge(
    "fleetwatch_fdr_alpha_wealth",
    "Alpha wealth left in the current FDR epoch (of the family's share of fdr_alpha)",
    ["family"],
)
FDR_LEVEL = Gauge("fleetwatch_fdr_level", "BH level of the last window gated", ["family"])

for _outcome in LABEL_OUTCOMES:
    LABELS.labels(outcome=_outcome)
for _family in FDR_FAMILIES:
    for _series in (FDR_TESTS, FDR_DISCOVERIES, FDR_TESTS_UNFUNDED, FDR_CAPACITY, FDR_ALPHA_WEALTH,
                    FDR_LEVEL):
        _series.labels(family=_family)

# -- stored configuration that does not parse (service.stored) --------------------------
CONFIG_ROLES = ("api", "aggregator", "detector", "joiner", "notifier")
CONFIG_KINDS = ("model", "detector", "silence", "receiver", "key", "reference", "floors", "shape")
CONFIG_ERRORS = Counter(
    "fleetwatch_config_errors_total",
    "Stored configurations that did not parse when read, by the role reading and the kind of "
    "configuration (the model falls back to its last good configuration or the defaults)",
    ["role", "kind"],
)
for _role in CONFIG_ROLES:
    for _kind in CONFIG_KINDS:
        CONFIG_ERRORS.labels(role=_role, kind=_kind)

# -- models created implicitly, by records of a model never registered (service.profiles.store) ---
IMPLICIT_OUTCOMES = ("created", "refused_rate", "refused_total")
IMPLICIT_MODELS = Counter(
    "fleetwatch_implicit_models_total",
    "Unregistered models met in records, by outcome: created, or refused by "
    "implicit_models_per_minute (refused_rate) or implicit_models_max (refused_total)",
    ["outcome"],
)
for _outcome in IMPLICIT_OUTCOMES:
    IMPLICIT_MODELS.labels(outcome=_outcome)
for _reason in DEAD_LETTER_REASONS:
    DEAD_LETTERED.labels(reason=_reason)

# -- paging (service.paging.notifier): labelled by receiver kind, never by receiver id --------
NOTIFICATION_OUTCOMES = ("delivered", "retried", "dead", "rate_limited")
NOTIFICATIONS = Counter(
    "fleetwatch_notifications_total",
    "Notification delivery outcomes (retried: a failed attempt to be tried again; "
    "rate_limited: deferred by the receiver's max_per_minute)",
    ["receiver_kind", "outcome"],
)
OUTBOX_ITEMS = Gauge(
    "fleetwatch_outbox_items", "Notifications in the outbox by state (pending, delivered, dead)", ["state"]
)
for _kind in ("webhook", "slack", "pagerduty", "alertmanager"):
    for _outcome in NOTIFICATION_OUTCOMES:
        NOTIFICATIONS.labels(receiver_kind=_kind, outcome=_outcome)
for _state in ("pending", "delivered", "dead"):
    OUTBOX_ITEMS.labels(state=_state)

# -- open alerts, read from Redis at scrape time (service.api.alert_metrics) --------------
MAX_EFFECT_SERIES = 500
ALERTS_OPEN = Gauge("fleetwatch_alerts_open", "Alerts not resolved, by state and severity",
                    ["state", "severity"])
ALERT_EFFECT = Gauge(
    "fleetwatch_alert_effect_size",
    "Latest effect size of each open alert (features with a firing alert only; at most 500 series)",
    ["model", "feature", "check"],
)
EFFECT_SERIES_DROPPED = Gauge(
    "fleetwatch_alert_effect_series_dropped", "Open alerts beyond the effect-size series budget"
)
for _state in ("firing", "acknowledged"):
    for _severity in ("info", "warning", "critical"):
        ALERTS_OPEN.labels(state=_state, severity=_severity)

#: Metric families whose labels hold model data (model ids, feature names) with values
#: (effect sizes). With FLEETWATCH_API_AUTH on they are served only to a scrape that sends
#: FLEETWATCH_METRICS_TOKEN (docs/api.md, "Metrics exposure").
MODEL_LABELLED = ("fleetwatch_alert_effect_size",)


class FleetLevel(Collector):
    """The families of ``registry`` without :data:`MODEL_LABELLED` (fleet-level counts only).

    Parameters
    ----------
    registry : Collector
        What to filter (default: the process' registry).
    """

    def __init__(self, registry: Collector = REGISTRY) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        return (family for family in self.registry.collect() if family.name not in MODEL_LABELLED)

# -- self-measurement (service.sim): the latest scorecard of `fleetwatch simulate` ------
# ``kind`` takes the scorecard's rows (service.sim.score.GROUPS: incident kinds, covariate
# shifts split at PSI 0.25): a fixed, bounded set.
SCORECARD_ALERT_PRECISION = Gauge(
    "fleetwatch_scorecard_alert_precision",
    "Share of alerts that map to an injected incident (latest simulated scenario)",
)
SCORECARD_RECALL = Gauge(
    "fleetwatch_scorecard_recall", "Share of injected incidents detected (latest simulated scenario)"
)
SCORECARD_KIND_RECALL = Gauge(
    "fleetwatch_scorecard_kind_recall", "Share of injected incidents detected, by incident kind", ["kind"]
)
SCORECARD_MTTD = Gauge(
    "fleetwatch_scorecard_mttd_minutes",
    "Mean time to detect in simulated minutes, by incident kind (NaN: none detected)", ["kind"]
)
SCORECARD_FALSE_PAGES = Gauge(
    "fleetwatch_scorecard_false_pages_per_1000_model_days",
    "Pages in incident-free control time per 1,000 model-days (latest simulated scenario)",
)
