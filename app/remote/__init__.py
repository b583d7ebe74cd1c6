"""Chat against remote OpenAI-compatible servers (vLLM, TGI, llama.cpp, Ollama…); no Qt."""
