"""Label-joined cohorts in Redis: joined predictions and mergeable counters per window and slice.

A cohort is one model's sampled predictions of one prediction window -- the
whole model's, or those of one *slice* (a value of one of the model's slice
keys). Redis holds it as a HASH of counters that ``HINCRBY`` /
``HINCRBYFLOAT`` update atomically, so any number of joiner replicas add to
it without coordination and a cohort is always the sum of its examples.

Modules:

``labels``    label values as counted (binary 0/1, class names, regression targets)
``slices``    slice ids and labels, which feature values make a slice, admission
``counters``  the counter map of a cohort, and the binary cohort's counter form
``codec``     the per-task codecs: predictions and labels -> counters -> cohorts
``lua``       the Lua scripts that store a prediction, join a label, admit slice values
``keys``      the Redis key layout
``store``     :class:`CohortStore`, the store over a ``redis.asyncio`` client
``joiner``    :class:`~service.cohorts.joiner.Joiner`, the label-joiner role: predictions kept, labels joined
``judging``   matured cohorts tested against their baseline, through the alert policy
"""

from service.cohorts.codec import (
    BinaryCodec,
    Codec,
    LoadedCohort,
    MulticlassCodec,
    Prediction,
    RegressionCodec,
    codec_for,
)
from service.cohorts.counters import delta, example_counters, to_counters
from service.cohorts.labels import binary_label, class_name
from service.cohorts.slices import parse_slice_id, parse_slice_label, slice_id, slice_label, slice_value
from service.cohorts.store import CohortStore

__all__ = ["BinaryCodec", "Codec", "CohortStore", "LoadedCohort", "MulticlassCodec", "Prediction",
           "RegressionCodec", "binary_label", "class_name", "codec_for", "delta", "example_counters",
           "parse_slice_id", "parse_slice_label", "slice_id", "slice_label", "slice_value", "to_counters"]
