"""Drift and data-quality tests on profiles, and the alert policy. Pure functions: no I/O."""

from detectors.result import Status, TestResult

__all__ = ["Status", "TestResult"]
