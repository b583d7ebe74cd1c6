"""Which small model on the hub can draft for a model (speculative decoding), by the model's repo id.

A draft must tokenize exactly as the model does, so it comes from the same family: its smallest
instruct model, published as GGUF by the family's own maintainers (or, for Llama, the most used
quantizer). One entry per family, most specific first; a new family is one line. The engine checks
every token at load and refuses a draft that differs by name, so a wrong guess costs a download, not
a wrong reply. `tailor pull` and the Models window's repo page offer the entry's repo.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DraftSuggestion:
    """A family's draft: `repo` (a GGUF repo) drafts for models whose repo id matches `pattern`."""

    family: str  # as people name it: "Qwen2.5"
    pattern: str  # regex, case-insensitive, searched in the model's repo id
    repo: str
    quant: str = "Q8_0"  # a draft's quality matters more than its size: it is small either way


SUGGESTIONS: tuple[DraftSuggestion, ...] = (
    DraftSuggestion("Qwen2.5-Coder", r"qwen2\.5-coder", "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"),
    DraftSuggestion("Qwen2.5", r"qwen2\.5(?!-coder|-vl|-omni|-math)", "Qwen/Qwen2.5-0.5B-Instruct-GGUF"),
    DraftSuggestion("Qwen3", r"qwen3(?!-vl|-omni|-coder-30b)", "Qwen/Qwen3-0.6B-GGUF"),
    DraftSuggestion("Llama 3", r"llama-3\.[123]", "bartowski/Llama-3.2-1B-Instruct-GGUF"),
)
# Models under 4B gain nothing from a draft: a draft pays at a quarter of the model's weights at most
# (app/services/planning/draft_finder.py's MAX_SHARE), and these are what drafts are made of.
_SMALL = re.compile(r"(?<![\w.])([0-3](\.\d+)?b|\d+m)\b", re.IGNORECASE)  # "-1.5B", "-135M"; not "A3B" (active)


def draft_for(repo_id: str) -> DraftSuggestion | None:
    """The draft to suggest for the model of `repo_id`; None for unknown families and for small models."""
    name = repo_id.split("/")[-1]
    if _SMALL.search(name):
        return None
    for suggestion in SUGGESTIONS:
        if re.search(suggestion.pattern, repo_id, re.IGNORECASE) and suggestion.repo.lower() != repo_id.lower():
            return suggestion
    return None
