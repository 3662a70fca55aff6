"""The Redis keys of profiles: every key this package (and the detector's status) writes.

Key layout for Redis Cluster: what must change atomically shares one hash slot. A model's
keys are tagged ``{model_id}`` (``fw:{m}:...``); fleet-wide keys are tagged ``{fw}``
(:data:`GLOBAL`, one slot); a partition checkpoint ``fw:agg:{topic}:{partition}`` is one
key (its own slot). No script or transaction spans two of these; the aggregator's
checkpoint, which spans many models, is a protocol of single-slot steps
(:mod:`service.profiles.checkpoints`).

==================================  ==============================================
``{fw}:models``                     SET of model ids
``fw:{m}:config``                   JSON :class:`ModelConfig`
``fw:{m}:ref``                      reference profile (bytes)
``fw:{m}:edges``                    the reference's bin edges per numeric feature (MessagePack,
                                    :mod:`sketches.bins`), written with the reference
``fw:{m}:floors``                   JSON the floors learned from the reference
                                    (:class:`~detectors.policy.learned.LearnedFloors`)
``fw:{m}:shape``                    JSON the reference's rows counted by local time of day
                                    (:class:`~detectors.volume_shape.DailyShape`)
``fw:{m}:idx``                      ZSET ``"{len}:{start}:{version}"`` by start
``fw:{m}:p:{len}:{start}:{ver}``    closed window or rollup profile (bytes, expires after
                                    its granularity's retention)
``fw:{m}:idx:{len}``                ZSET rollups of ``len`` seconds (1 h, 1 d) by start
``fw:agg:{topic}:{partition}``      HASH: epoch, offset, watermarks, open partial profiles,
                                    closed windows not yet published (``pub:`` fields)
``fw:{m}:pending``                  ZSET closed windows the alert policy has not applied
``{fw}:windows``                    STREAM of window-closed events (model, member)
``fw:{m}:status``                    HASH the detector's per-model counters: ``evaluated``,
                                    ``skipped:{reason}``, ``records``, ``abandoned``,
                                    ``last_window``, ``last_window_start``, ``last_baseline``,
                                    ``last_evaluated_at``, ``last_fdr_window`` (its gate
                                    record: :mod:`service.alerting.store`)
``fw:{m}:counted``                  ZSET windows already counted in ``status``, by start
                                    (a window evaluated twice counts once)
``{fw}:implicit``                   SET of the models created implicitly (by records of a
                                    model never registered)
``{fw}:implicit:{minute}``          models created implicitly in that minute (expires)
``fw:{m}:counts``                   HASH member -> record count: the dashboard's cache of the
                                    counts of closed windows (profiles never change once closed)
``fw:{m}:heat:{member}``            JSON the window's heatmap cells
                                    (:func:`~service.profiles.fleet.heat_cells`), written with its
                                    results and expiring with them
``{fw}:fleet:columns``              HASH model -> JSON :class:`~service.profiles.fleet.ModelColumns`
                                    (owner, tier, window length, upstream sources), written with
                                    the configuration
``{fw}:fleet:latest``               HASH model -> JSON :class:`~service.profiles.fleet.LatestWindow`:
                                    its latest window with results (member, start, status)
``fw:{m}:res:{member}``             JSON test results of one window (the drift API's)
``fw:{m}:detcfg``                   JSON detector configuration (its set fields)
``fw:{m}:base:{key}``               HASH ``profile`` (bytes) + ``counts`` (JSON list): a merged
                                    trailing or seasonal baseline, cached
``{fw}:traffic:{len}:{start}``      HASH JSON ``[model, version]`` -> records of the window
                                    closed there (windows shorter than a day; expires):
                                    the fleet's traffic, the volume test's control
                                    (:mod:`detectors.volume_fleet`), written with the
                                    window-closed event
``{fw}:traffic:{len}:through``      ZSET model -> start of its latest closed window of ``len``
==================================  ==============================================

``{fw}:models`` and the two ``fw:fleet:`` hashes are the fleet overview's index: what it
filters and sorts on for every model is read in one round trip instead of one command per
model.

Alerts, alert series and incidents: :mod:`service.alerting.keys`; the FDR gate:
:mod:`service.alerting.fdr`; silences: :mod:`service.alerting.silences`; cohorts:
:mod:`service.cohorts.keys`; the outbox: :mod:`service.paging.keys`.
"""

from __future__ import annotations

import json

#: Prefix of every fleet-wide key (model list, fleet index, window-closed events, alerts,
#: incidents, FDR gate, silences, outbox, receivers, API keys): the hash tag ``{fw}`` puts
#: them all in one Redis Cluster hash slot, so a script or transaction over several of them
#: stays atomic on a cluster. A model's keys are ``fw:{m}:...``, a partition checkpoint
#: ``fw:agg:...``: neither pattern can match a fleet-wide key.
GLOBAL = "{fw}:"
MODELS = "{fw}:models"
#: Prefix of an open window's field in a partition checkpoint (``service.profiles.aggregator``).
OPEN_FIELD = b"open:"
#: Prefix of a closed window's field in a partition checkpoint until it is published to its
#: model's keys (``service.profiles.checkpoints``).
PUBLISH_FIELD = "pub:"
#: Field of a partition checkpoint counting one model's records dead-lettered under one
#: reason (other than late and future, counted in ``late:{m}`` and ``fut:{m}``).
DEAD_FIELD = "dl:"
WINDOWS_STREAM = "{fw}:windows"
FLEET_COLUMNS = "{fw}:fleet:columns"
FLEET_LATEST = "{fw}:fleet:latest"
IMPLICIT = "{fw}:implicit"
#: Characters special in a Redis glob pattern (escaped to match a model id literally).
_GLOB_SPECIAL = str.maketrans({c: "\\" + c for c in "*?[]\\^"})


def traffic_key(length: int, start: int) -> str:
    """HASH of the records per model and version of the fleet's windows of ``length``
    seconds closed at ``start``.

    Examples
    --------
    >>> traffic_key(3600, 7200), traffic_through_key(3600)
    ('{fw}:traffic:3600:7200', '{fw}:traffic:3600:through')
    """
    return f"{GLOBAL}traffic:{length}:{start}"


def traffic_through_key(length: int) -> str:
    """ZSET model -> start of its latest closed window of ``length`` seconds."""
    return f"{GLOBAL}traffic:{length}:through"


def traffic_through_pattern() -> str:
    """Matches :func:`traffic_through_key` of every window length."""
    return f"{GLOBAL}traffic:*:through"


def traffic_field(model_id: str, version: str) -> str:
    """The field of one model version in a :func:`traffic_key` hash.

    Examples
    --------
    >>> traffic_field("fraud", "v2")
    '["fraud", "v2"]'
    """
    return json.dumps([model_id, version])


def config_key(m: str) -> str:
    return f"fw:{{{m}}}:config"


def reference_key(m: str) -> str:
    return f"fw:{{{m}}}:ref"


def edges_key(m: str) -> str:
    return f"fw:{{{m}}}:edges"


def floors_key(m: str) -> str:
    """JSON of the floors learned from the model's reference (``LearnedFloors.to_dict``)."""
    return f"fw:{{{m}}}:floors"


def shape_key(m: str) -> str:
    """JSON of the daily shape of the reference's event times (``DailyShape.to_dict``)."""
    return f"fw:{{{m}}}:shape"


def window_index_key(m: str, granularity: int | None = None) -> str:
    """The model's index of closed windows (``granularity`` None), or of its rollups of
    ``granularity`` seconds.

    Examples
    --------
    >>> window_index_key("fraud"), window_index_key("fraud", 3600)
    ('fw:{fraud}:idx', 'fw:{fraud}:idx:3600')
    """
    return f"fw:{{{m}}}:idx" if granularity is None else f"fw:{{{m}}}:idx:{granularity}"


def window_member(window_seconds: int, start: int, version: str) -> str:
    """A window's member in the model's index (and in its profile key).

    Examples
    --------
    >>> member = window_member(300, 1_700_000_100, "v2:rc1")
    >>> member, parse_member(member)
    ('300:1700000100:v2:rc1', (300, 1700000100, 'v2:rc1'))
    """
    return f"{window_seconds}:{start}:{version}"


def parse_member(member: str) -> tuple[int, int, str]:
    """(length, start, version) of a window member (:func:`window_member`)."""
    length, start, version = member.split(":", 2)
    return int(length), int(start), version


def window_looks_key(m: str, member: str) -> str:
    """LIST of the looks at the window while it was open (JSON bodies of
    :meth:`~service.profiles.looks.WindowLook.to_fields`), for its close."""
    return f"fw:{{{m}}}:wlooks:{member}"


def counts_key(m: str) -> str:
    """HASH member -> record count of the model's closed windows (a cache of the profiles')."""
    return f"fw:{{{m}}}:counts"


def heat_key(m: str, member: str) -> str:
    """JSON heatmap cells of one window's results (:func:`~service.profiles.fleet.heat_cells`)."""
    return f"fw:{{{m}}}:heat:{member}"


def dead_field(model_id: str, reason: str) -> str:
    """The partition checkpoint's field counting a model's records dead-lettered under ``reason``.

    Examples
    --------
    >>> dead_field("fraud v2", "not_finite")
    'dl:["fraud v2", "not_finite"]'
    """
    return DEAD_FIELD + json.dumps([model_id, reason])


def pending_key(m: str) -> str:
    """ZSET of the model's closed windows not yet through the alert policy, by start."""
    return f"fw:{{{m}}}:pending"


def profile_key(m: str, member: str) -> str:
    return f"fw:{{{m}}}:p:{member}"


def partition_key(topic: str, partition: int) -> str:
    return f"fw:agg:{topic}:{partition}"


def partitions_pattern(topic: str) -> str:
    """The SCAN pattern of every partition checkpoint of ``topic``."""
    return f"fw:agg:{topic}:*"


def status_key(m: str) -> str:
    return f"fw:{{{m}}}:status"


#: Prefix of the status-hash fields counting records refused by ``POST /v1/ingest``, by reason.
REJECTED_FIELD = "rejected:"


def counted_key(m: str) -> str:
    """ZSET of the windows already counted in the model's status, by start."""
    return f"fw:{{{m}}}:counted"


def results_key(m: str, member: str) -> str:
    return f"fw:{{{m}}}:res:{member}"


def detector_config_key(m: str) -> str:
    return f"fw:{{{m}}}:detcfg"


def baseline_key(m: str, key: str) -> str:
    return f"fw:{{{m}}}:base:{key}"


def implicit_minute_key(minute: int) -> str:
    """Models created implicitly in that minute (Unix minutes; the key expires)."""
    return f"{IMPLICIT}:{minute}"


def model_keys_pattern(m: str) -> str:
    """The SCAN pattern of every key of model ``m`` (``fw:{m}:*``, the id taken literally).

    Examples
    --------
    >>> model_keys_pattern("a*b")
    'fw:{a\\\\*b}:*'
    """
    return f"fw:{{{m.translate(_GLOB_SPECIAL)}}}:*"


def legacy_fleet_key(key: str) -> str | None:
    """The name of ``key``, a key of the layout before fleet-wide keys were tagged
    ``{fw}``, in today's layout; None if it is named as today (a model's key, a partition
    checkpoint) or is not fleetwatch's.

    Examples
    --------
    >>> [legacy_fleet_key(k) for k in ("fw:models", "fw:alert:9f", "fw:{fraud}:alerts",
    ...                                "fw:{fraud}:config", "fw:agg:fw.predictions:3", "other")]
    ['{fw}:models', '{fw}:alert:9f', '{fw}:alerts:fraud', None, None, None]
    """
    if not key.startswith("fw:") or key.startswith("fw:agg:"):
        return None
    rest = key[len("fw:"):]
    if rest.startswith("{"):  # a model's key: only its alert index moved
        return GLOBAL + "alerts:" + rest[1:-len("}:alerts")] if rest.endswith("}:alerts") else None
    return GLOBAL + rest
