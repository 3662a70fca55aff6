"""Sampling distributions shared by the detectors (no sketches, no profiles)."""
