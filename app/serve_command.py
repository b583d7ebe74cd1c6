"""`tailor serve`: serve a model over an OpenAI-compatible HTTP API."""
