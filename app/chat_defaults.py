"""Defaults of a new chat, shared by the window and the CLI."""

from __future__ import annotations

# Small models drift (SmolLM2-135M answers "What is the capital of France?" in broken French
# about half the time without one); a short, neutral system prompt keeps them on task.
# Each chat can change or clear it; `tailor chat --system ""` sends none.
DEFAULT_SYSTEM_PROMPT = "You are Tailor, a helpful assistant. Reply clearly and concisely."
DEFAULT_TEMPERATURE = 0.7
DEFAULT_TOP_P = 0.95
DEFAULT_MAX_TOKENS = 512
DEFAULT_N_CTX = 4096
