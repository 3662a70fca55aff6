"""The cohort store's Redis keys (hash-tagged by model ``m`` for Redis Cluster).

====================================  ==============================================
``fw:{m}:pred:{prediction id}``        HASH ``s`` score / prediction or ``c``
                                       predicted class, ``w`` window start, ``t``
                                       event time, ``sl`` JSON slice ids, ``y``
                                       label once joined; expires after the window,
                                       the label horizon and a day
``fw:{m}:coh:{start}``                 HASH the whole model's cohort counters
                                       (:mod:`service.cohorts.codec`), kept for
                                       ``retention_hourly_seconds``
``fw:{m}:coh:{start}:{slice id}``      HASH a slice's cohort counters; a slice id is
                                       the JSON ``["<key>","<value>"]``
``fw:{m}:cohslices:{start}``           SET slice ids with a cohort in the window
``fw:{m}:cohorts``                     ZSET cohort window starts
``fw:{m}:cohstate``                    HASH window start -> JSON evaluation (matured
                                       whole-model cohorts)
``fw:{m}:slicestate:{start}``          HASH slice id -> JSON evaluation (matured
                                       slice cohorts)
``fw:{m}:slicepending``                ZSET window starts with slice cohorts not
                                       judged yet
``fw:{m}:slicevals:{key}``             ZSET admitted values of a slice key, by the
                                       event time they were last seen
``fw:{m}:labelstats``                  HASH joined, duplicate, relabeled, unknown,
                                       late, invalid, watermark (max prediction event
                                       time)
``fw:{m}:parked``                      ZSET labels whose prediction has not been read
                                       yet, by label time
``fw:{m}:cohref``                      HASH the labelled reference's cohort counters
                                       (uploaded with the reference; no expiry)
====================================  ==============================================
"""

from __future__ import annotations


def reference_cohort_key(m: str) -> str:
    return f"fw:{{{m}}}:cohref"


def pred_key(m: str, prediction_id: str) -> str:
    return f"fw:{{{m}}}:pred:{prediction_id}"


def cohort_key(m: str, start: int, sid: str | None = None) -> str:
    return f"fw:{{{m}}}:coh:{start}" if sid is None else f"fw:{{{m}}}:coh:{start}:{sid}"


def window_slices_key(m: str, start: int) -> str:
    return f"fw:{{{m}}}:cohslices:{start}"


def starts_key(m: str) -> str:
    return f"fw:{{{m}}}:cohorts"


def evaluations_key(m: str) -> str:
    return f"fw:{{{m}}}:cohstate"


def slice_state_key(m: str, start: int) -> str:
    return f"fw:{{{m}}}:slicestate:{start}"


def slices_pending_key(m: str) -> str:
    return f"fw:{{{m}}}:slicepending"


def slice_values_key(m: str, key: str) -> str:
    return f"fw:{{{m}}}:slicevals:{key}"


def stats_key(m: str) -> str:
    return f"fw:{{{m}}}:labelstats"


def parked_key(m: str) -> str:
    return f"fw:{{{m}}}:parked"
