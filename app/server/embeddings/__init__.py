"""Embeddings over HTTP: OpenAI's POST /v1/embeddings (route.py), and `embed_with` (service.py) for every API
that embeds (Ollama's /api/embed): the request's inputs checked (params.py), a vector each from the model the
router lends, shaped as OpenAI's answer (response.py)."""
