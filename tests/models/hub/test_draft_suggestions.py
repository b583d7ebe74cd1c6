"""Which repo drafts for a model (models/hub/draft_suggestions.py): by family, never for small models."""

from __future__ import annotations

import pytest

from models.hub.draft_suggestions import draft_for


@pytest.mark.parametrize(("repo", "draft"), [
    ("Qwen/Qwen2.5-7B-Instruct-GGUF", "Qwen/Qwen2.5-0.5B-Instruct-GGUF"),
    ("bartowski/Qwen2.5-32B-Instruct-GGUF", "Qwen/Qwen2.5-0.5B-Instruct-GGUF"),
    ("Qwen/Qwen2.5-Coder-7B-Instruct-GGUF", "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"),
    ("Qwen/Qwen3-8B-GGUF", "Qwen/Qwen3-0.6B-GGUF"),
    ("Qwen/Qwen3-30B-A3B-GGUF", "Qwen/Qwen3-0.6B-GGUF"),  # 3B active of 30B: not a small model
    ("bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "bartowski/Llama-3.2-1B-Instruct-GGUF"),
    ("bartowski/Meta-Llama-3.1-70B-Instruct-GGUF", "bartowski/Llama-3.2-1B-Instruct-GGUF"),
])
def test_a_family_model_gets_its_familys_smallest_model(repo: str, draft: str):
    suggestion = draft_for(repo)
    assert suggestion is not None and suggestion.repo == draft and suggestion.quant == "Q8_0"


@pytest.mark.parametrize("repo", [
    "Qwen/Qwen2.5-0.5B-Instruct-GGUF",  # the draft itself
    "Qwen/Qwen2.5-1.5B-Instruct-GGUF",  # under 4B: a 0.5B draft is a third of it, too big to pay
    "bartowski/Llama-3.2-3B-Instruct-GGUF",
    "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF",
    "Qwen/Qwen2.5-VL-7B-Instruct-GGUF",  # a vision model: another tokenizer setup
    "org/Tiny-GGUF",  # no family we know
])
def test_no_suggestion_for_drafts_small_models_and_unknown_families(repo: str):
    assert draft_for(repo) is None
