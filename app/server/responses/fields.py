"""Every field of a Responses API request body, and what this server does with it.

As field_policy.py for chat: a field is honoured, accepted because it changes nothing here, or refused
with a 400 naming it when it asks for something this server does not do. A field OpenAI does not have
is refused too. tests/app/server/test_responses_fields.py walks the `openai` package's request type
and checks each field against this table.
"""

from __future__ import annotations

from typing import Any

from app.server.errors import bad_param

# Fields request.py reads and honours (some only at their neutral value: see request.py).
HONOURED = frozenset({
    "model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "tools", "tool_choice",
    "parallel_tool_calls", "reasoning", "text", "previous_response_id", "store", "stream", "include",
})
# Identifiers and hints that change nothing in a reply: accepted whatever their value. `max_tool_calls`
# bounds built-in tools' calls, and this server runs none; `stream_options` only asks for obfuscation
# padding, which a local server has no use for.
# `client_metadata` is not in the openai package: Codex CLI sends its session and turn ids in it.
NO_EFFECT = frozenset({
    "user", "metadata", "safety_identifier", "prompt_cache_key", "prompt_cache_retention", "prompt_cache_options",
    "service_tier", "max_tool_calls", "stream_options", "client_metadata",
})
# Fields refused unless they hold the value that changes nothing (None always does).
_NEUTRAL: dict[str, tuple[Any, ...]] = {
    "background": (False,),
    "truncation": ("disabled",),
    "top_logprobs": (0,),
    "context_management": ([],),
    "conversation": (),
    "prompt": (),
    "moderation": (),
    "image": (),
    "access_programs": (),
    "background_options": (),
}
_WHY = {
    "background": "This server runs no background responses: send the request without 'background' (stream it "
                  "to see it progress).",
    "truncation": "This server does not drop earlier turns to fit the context: 'truncation' must be 'disabled'.",
    "top_logprobs": "Log probabilities are not supported by this server.",
    "context_management": "This server does not compact conversations.",
    "conversation": "This server has no Conversations API: use 'previous_response_id' (or send the turns in 'input').",
    "prompt": "This server has no stored prompt templates: send the text in 'instructions' and 'input'.",
    "moderation": "This server does not moderate.",
    "background_options": "This server runs no background responses.",
}


def check_fields(body: dict) -> None:
    """400 for a field this server does not know, or one it cannot honour as set."""
    for name, value in body.items():
        if name in HONOURED or name in NO_EFFECT or value is None:
            continue
        if name in _NEUTRAL:
            if any(type(value) is type(neutral) and value == neutral for neutral in _NEUTRAL[name]):
                continue
            raise bad_param(name, _WHY.get(name, f"'{name}' is not supported by this server."))
        raise bad_param(name, f"'{name}' is not a field this server knows.")
