"""The FastAPI alert and profile API."""
