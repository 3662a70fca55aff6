"""Grouping alerts into incidents by root cause, and inhibition of symptoms.

Features declare their upstream source (lineage) at model registration.
Alerts on features that share a source -- within one model or across models --
open or join the same incident, named by the source. Without declared
lineage, the feature name is the key, so the same feature failing across
models is one incident. Window-level checks, the score, the prediction and the
multivariate checks (``__multivariate__``: the numeric features taken together)
are the model's own: their key names the model, and the two multivariate checks
share one key (one change in how the features move together is one incident).

Inhibition (as Alertmanager's inhibit rules): while a data-quality alert fires
for a (model, feature), drift alerts on that feature are symptoms; they are
recorded but not notified. A multivariate alert is a symptom while any of the
model's features has a data-quality alert firing (a feature arriving null or
broken changes the complete rows and the correlations it is part of).
"""

from __future__ import annotations

from collections.abc import Collection

from detectors.multivariate import MULTIVARIATE_FEATURE

#: Checks about the data arriving broken rather than its distribution moving.
DATA_QUALITY_CHECKS = frozenset({"null_rate", "type_mismatch", "nonfinite", "out_of_range", "volume"})
#: Pseudo-features that belong to the model itself.
MODEL_FEATURES = frozenset({"", "__score__", "__prediction__", "__performance__", MULTIVARIATE_FEATURE})


def group_key(model_id: str, feature: str, check: str, source: str | None) -> str:
    """The incident key of an alert.

    Examples
    --------
    >>> group_key("m1", "temp", "psi", "weather_feed"), group_key("m1", "temp", "psi", None)
    ('source:weather_feed', 'feature:temp')
    >>> group_key("m1", "", "volume", None)
    'model:m1:volume'
    >>> group_key("m1", "__multivariate__", "correlation", None)
    'model:m1:__multivariate__'
    """
    if feature in MODEL_FEATURES:
        return f"model:{model_id}:{feature or check}"
    return f"source:{source}" if source else f"feature:{feature}"


def inhibited(check: str, feature: str, firing_quality: Collection[str]) -> bool:
    """Is a ``check`` alert on ``feature`` a symptom of a firing data-quality alert?

    Parameters
    ----------
    firing_quality : collection of str
        Features of the model with a data-quality alert firing.

    Examples
    --------
    >>> inhibited("psi", "temp", {"temp"}), inhibited("null_rate", "temp", {"temp"})
    (True, False)
    >>> mv = "__multivariate__"
    >>> inhibited("correlation", mv, {"temp"}), inhibited("correlation", mv, {""})
    (True, False)
    """
    if check in DATA_QUALITY_CHECKS:
        return False
    if feature == MULTIVARIATE_FEATURE:
        return any(f not in MODEL_FEATURES for f in firing_quality)
    return feature in firing_quality
