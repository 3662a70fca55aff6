"""Data-quality tests on profiles."""
