"""Mergeable sketch profiles of prediction traffic. Pure computation: no I/O."""

from sketches.categorical import CategoricalSketch
from sketches.numeric import NumericSketch
from sketches.profile import PROFILE_FORMAT_VERSION, FeatureProfile, WindowProfile
from sketches.window import window_start

__all__ = [
    "PROFILE_FORMAT_VERSION",
    "CategoricalSketch",
    "FeatureProfile",
    "NumericSketch",
    "WindowProfile",
    "window_start",
]
