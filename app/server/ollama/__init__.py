"""Ollama's API (/api/chat, /api/generate, /api/tags, /api/show, /api/ps, /api/pull...), what every app with
an "Ollama" provider speaks, on the same engine path and model router as the OpenAI-compatible API."""
