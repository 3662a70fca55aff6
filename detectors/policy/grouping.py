"""Grouping alerts into incidents by root cause, and inhibition of symptoms.

Features declare their upstream source (lineage) at model registration.
Alerts on features that share a source -- within one model or across models --
open or join the same incident, named by the source. Without declared
lineage, the feature name is the key, so the same feature failing across
models is one incident. Window-level checks and the score and prediction are
the model's own: their key names the model.

Inhibition (as Alertmanager's inhibit rules): while a data-quality alert fires
for a (model, feature), drift alerts on that feature are symptoms; they are
recorded but not notified.
"""

from __future__ import annotations

from collections.abc import Collection

#: Checks about the data arriving broken rather than its distribution moving.
DATA_QUALITY_CHECKS = frozenset({"null_rate", "type_mismatch", "nonfinite", "out_of_range", "volume"})
#: Pseudo-features that belong to the model itself.
MODEL_FEATURES = frozenset({"", "__score__", "__prediction__", "__performance__"})


def group_key(model_id: str, feature: str, check: str, source: str | None) -> str:
    """The incident key of an alert.

    Examples
    --------
    >>> group_key("m1", "temp", "psi", "weather_feed"), group_key("m1", "temp", "psi", None)
    ('source:weather_feed', 'feature:temp')
    >>> group_key("m1", "", "volume", None)
    'model:m1:volume'
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
    """
    return check not in DATA_QUALITY_CHECKS and feature in firing_quality
