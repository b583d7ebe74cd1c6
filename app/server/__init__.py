"""OpenAI-compatible HTTP server over the engine (no Qt): `tailor serve` and the window's toggle."""
