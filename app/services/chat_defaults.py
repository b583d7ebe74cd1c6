"""Defaults of a new chat, shared by the window and the CLI."""

from __future__ import annotations

from models.plan.context import AUTO_CONTEXT_CAP

# Small models drift (SmolLM2-135M answers "What is the capital of France?" in broken French
# about half the time without one); a short, neutral system prompt keeps them on task.
# Each chat can change or clear it; `tailor chat --system ""` sends none.
DEFAULT_SYSTEM_PROMPT = "You are Tailor, a helpful assistant. Reply clearly and concisely."
DEFAULT_TEMPERATURE = 0.7
DEFAULT_TOP_P = 0.95
DEFAULT_MAX_TOKENS = 512
# A new chat's context: None is Context: Auto, the largest that fits this machine beside the
# model, at most DEFAULT_AUTO_CTX_CAP tokens and the model's trained length.
DEFAULT_CONTEXT: int | None = None
DEFAULT_AUTO_CTX_CAP = AUTO_CONTEXT_CAP
# The context when Auto cannot be worked out (a header that cannot be read) and of `tailor serve`.
DEFAULT_N_CTX = 4096
