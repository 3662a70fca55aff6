"""Distribution drift tests on sketches."""
