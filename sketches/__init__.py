"""Mergeable sketch profiles of prediction traffic. Pure computation: no I/O."""

from sketches.categorical import CategoricalSketch
from sketches.codec import PROFILE_FORMAT_VERSION
from sketches.feature import FeatureProfile
from sketches.numeric import NumericSketch
from sketches.profile import WindowProfile
from sketches.slices import SliceSet
from sketches.tdigest import TDigest
from sketches.window import window_starts

__all__ = [
    "PROFILE_FORMAT_VERSION",
    "CategoricalSketch",
    "FeatureProfile",
    "NumericSketch",
    "SliceSet",
    "TDigest",
    "WindowProfile",
    "window_starts",
]
