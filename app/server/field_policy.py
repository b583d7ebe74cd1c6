"""Every field of OpenAI's request bodies, and what this server does with it.

A field is honoured (it does what OpenAI's does), accepted because it changes no output here
(identifiers, cache hints: the prefix cache is always on), or refused with a 400 naming it when it
is set to anything but its neutral value. A field OpenAI does not have is refused too: a typo or
another server's option must never be silently dropped. tests/app/server/test_request_fields.py
walks the `openai` package's request types and checks each field against this table.
"""

from __future__ import annotations

from typing import Any

from app.server.errors import bad_param

# Fields params.py reads and honours.
CHAT_HONOURED = frozenset({
    "model", "messages", "max_tokens", "max_completion_tokens", "n", "seed", "stop", "stream", "stream_options",
    "temperature", "top_p", "tools", "tool_choice", "parallel_tool_calls", "response_format", "reasoning_effort",
    "logprobs", "top_logprobs",
})
COMPLETION_HONOURED = frozenset({
    "model", "prompt", "max_tokens", "n", "seed", "stop", "stream", "stream_options", "temperature", "top_p",
    "echo", "best_of", "suffix", "logprobs",
})
# Identifiers and hints that change nothing in a reply: accepted whatever their value.
NO_EFFECT = frozenset({
    "user", "metadata", "safety_identifier", "prompt_cache_key", "prompt_cache_retention", "prompt_cache_options",
    "service_tier",
})
# Fields refused unless they hold the value that changes nothing (None always does): what it is.
_NEUTRAL: dict[str, tuple[Any, ...]] = {
    "frequency_penalty": (0, 0.0),
    "presence_penalty": (0, 0.0),
    "logit_bias": ({},),
    "store": (False,),
    "modalities": (["text"],),
    "verbosity": (),
    "audio": (),
    "prediction": (),
    "web_search_options": (),
    "functions": (),
    "function_call": (),
    "moderation": (),
}
_WHY = {
    "frequency_penalty": "Repetition penalties are not supported by this server.",
    "presence_penalty": "Repetition penalties are not supported by this server.",
    "logit_bias": "'logit_bias' is not supported by this server.",
    "store": "This server stores no completions.",
    "modalities": "This server writes text only.",
    "functions": "'functions' is deprecated: send 'tools' instead.",
    "function_call": "'function_call' is deprecated: send 'tool_choice' instead.",
}


def check_fields(body: dict, chat: bool) -> None:
    """400 for a field this server does not know, or one it cannot honour as set."""
    honoured = CHAT_HONOURED if chat else COMPLETION_HONOURED
    for name, value in body.items():
        if name in honoured or name in NO_EFFECT or value is None:
            continue
        if name in _NEUTRAL:
            # Compared with its type: `false` is not the 0 that asks for no penalty.
            if any(type(value) is type(neutral) and value == neutral for neutral in _NEUTRAL[name]):
                continue
            raise bad_param(name, _WHY.get(name, f"'{name}' is not supported by this server."))
        raise bad_param(name, f"'{name}' is not a field this server knows.")
