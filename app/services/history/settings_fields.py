"""A chat's settings from JSON that may be wrong: each field checked for its type and range.

The history stores each chat's settings as JSON, and an import brings settings written by another
program or by hand. A value of the wrong type or out of range (a list for the system prompt,
"hot" for the temperature, 10^30 tokens) would reach the widgets and the engine and fail there, far
from its cause; here it falls back to the field's default, and a line says which field and why.
The ranges are the widest the window offers (the settings panel takes them from here).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from app.services.chat_defaults import (
    DEFAULT_AUTO_CTX_CAP,
    DEFAULT_CONTEXT,
    DEFAULT_MAX_TOKENS,
    DEFAULT_SYSTEM_PROMPT,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_P,
)
from app.services.history.tool_steps import NAME_LIMIT
from app.services.load_settings import LoadSettings
from engine.protocol import REASONING_CHOICES
from models.plan.load_options import SPECULATIVE_MODES, SpeculativeOptions, TorchOptions

KV_TYPES: tuple[str, ...] = ("f16", "q8_0", "q4_0")
FLASH_ATTN: tuple[str, ...] = ("auto", "on", "off")
TEMPERATURE_RANGE = (0.0, 2.0)
TOP_P_RANGE = (0.0, 1.0)
CONTEXT_RANGE = (256, 1 << 20)  # a smaller context holds no template and reply; 1M: today's longest trained
MAX_TOKENS_RANGE = (1, CONTEXT_RANGE[1])  # a reply is at most a context long
DRAFT_TOKENS_RANGE = (1, 64)
GPU_SHARE_RANGE = (0.1, 1.0)
CPU_KV_BYTES_RANGE = (1 << 28, 64 << 30)  # 0.25 to 64 GiB
TOOL_STEP_CAP_RANGE = (1, 100)  # a reply's tool steps (each one model turn and its calls) before it must answer
DOCUMENT_BUDGET_RANGE = (64, CONTEXT_RANGE[1])  # the most tokens a message's documents may take
KNOWLEDGE_NAME_LIMIT = 64  # a knowledge index's name (app/services/documents/knowledge.py)
DEFAULT_TOOL_STEP_CAP = 10
# What a reply's first request asks of the model when the chat has tools: "auto" (it may call them) or
# "required" (it must call one; the requests after its calls are "auto" again, so it can answer).
TOOL_CHOICES: tuple[str, ...] = ("auto", "required")
MAX_NAMES = 256  # MCP servers on in a chat, tools allowed in it


@dataclass(frozen=True, slots=True)
class _Field:
    default: Any
    check: Callable[[Any], bool]
    wanted: str  # what the value must be, in words


def _number(low: float, high: float) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int | float) and not isinstance(v, bool) and _finite(v) and low <= v <= high


def _whole(low: int, high: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


def _or_none(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


def _one_of(choices: tuple[str, ...]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, str) and v in choices


def _names(v: Any) -> bool:
    """A list of names (a server's, a tool's): each one line of text, not empty, not too long."""
    return (isinstance(v, list | tuple) and len(v) <= MAX_NAMES
            and all(isinstance(n, str) and n.strip() and len(n) <= NAME_LIMIT and n.isprintable() for n in v))


_TEXT = "text"
_NAMES = f"a list of at most {MAX_NAMES} names, each one line of 1 to {NAME_LIMIT} characters"
# ChatSettings' fields and its load's (LOAD_KEYS) under their stored (flat) keys, in the stored order: the
# default, the check, and what is wanted.
CHAT_FIELDS: dict[str, _Field] = {
    "system_prompt": _Field(DEFAULT_SYSTEM_PROMPT, lambda v: isinstance(v, str), _TEXT),
    "temperature": _Field(DEFAULT_TEMPERATURE, _number(*TEMPERATURE_RANGE), "a number from 0 to 2"),
    "top_p": _Field(DEFAULT_TOP_P, _number(*TOP_P_RANGE), "a number from 0 to 1"),
    "max_tokens": _Field(DEFAULT_MAX_TOKENS, _whole(*MAX_TOKENS_RANGE), f"a whole number from 1 to {MAX_TOKENS_RANGE[1]}"),
    "n_ctx": _Field(DEFAULT_CONTEXT, _or_none(_whole(*CONTEXT_RANGE)),
                    f"null (Auto) or a whole number from {CONTEXT_RANGE[0]} to {CONTEXT_RANGE[1]}"),
    "auto_ctx_cap": _Field(DEFAULT_AUTO_CTX_CAP, _whole(*CONTEXT_RANGE),
                           f"a whole number from {CONTEXT_RANGE[0]} to {CONTEXT_RANGE[1]}"),
    "kv_type": _Field("f16", _one_of(KV_TYPES), f"one of {', '.join(KV_TYPES)}"),
    "flash_attn": _Field("auto", _one_of(FLASH_ATTN), f"one of {', '.join(FLASH_ATTN)}"),
    "reasoning": _Field("auto", _one_of(REASONING_CHOICES), f"one of {', '.join(REASONING_CHOICES)}"),
    "think_budget": _Field(None, _or_none(_whole(1, MAX_TOKENS_RANGE[1])),
                           f"null or a whole number from 1 to {MAX_TOKENS_RANGE[1]}"),
    # Tools: the MCP servers on in this chat (none: tools off), the tools allowed "Always in this chat",
    # the most tool steps a reply takes before it must answer, and whether its first request must call one.
    "tool_servers": _Field((), _names, _NAMES),
    "allowed_tools": _Field((), _names, _NAMES),
    "tool_step_cap": _Field(DEFAULT_TOOL_STEP_CAP, _whole(*TOOL_STEP_CAP_RANGE),
                            f"a whole number from 1 to {TOOL_STEP_CAP_RANGE[1]}"),
    "tool_choice": _Field("auto", _one_of(TOOL_CHOICES), f"one of {', '.join(TOOL_CHOICES)}"),
    # Documents: the most tokens a message's documents may take (None: all the context leaves), and the
    # knowledge index the chat answers from (its name; None: none).
    "document_budget": _Field(None, _or_none(_whole(*DOCUMENT_BUDGET_RANGE)),
                              f"null or a whole number from {DOCUMENT_BUDGET_RANGE[0]} to {DOCUMENT_BUDGET_RANGE[1]}"),
    "knowledge": _Field(None, _or_none(lambda v: isinstance(v, str) and 0 < len(v) <= KNOWLEDGE_NAME_LIMIT
                                       and v.isprintable()),
                        f"null or a name of 1 to {KNOWLEDGE_NAME_LIMIT} characters"),
}
LOAD_KEYS = frozenset({"n_ctx", "auto_ctx_cap", "kv_type", "flash_attn"})  # LoadSettings' fields (ChatSettings.load)
SPECULATION_FIELDS: dict[str, tuple[str, _Field]] = {  # SpeculativeOptions' field: (stored key, field)
    "mode": ("speculative", _Field("auto", _one_of(SPECULATIVE_MODES), f"one of {', '.join(SPECULATIVE_MODES)}")),
    "draft_path": ("draft_path", _Field(None, _or_none(lambda v: isinstance(v, str) and v != ""),
                                        "null or a path")),
    "tokens": ("speculative_tokens", _Field(None, _or_none(_whole(*DRAFT_TOKENS_RANGE)),
                                            f"null or a whole number from 1 to {DRAFT_TOKENS_RANGE[1]}")),
}
TORCH_FIELDS: dict[str, _Field] = {
    "gpu_memory_fraction": _Field(0.9, _number(*GPU_SHARE_RANGE), "a number from 0.1 to 1"),
    "cpu_kv_bytes": _Field(None, _or_none(_whole(*CPU_KV_BYTES_RANGE)),
                           f"null or a whole number of bytes from {CPU_KV_BYTES_RANGE[0]} to {CPU_KV_BYTES_RANGE[1]}"),
}


@dataclass(frozen=True, slots=True)
class ParsedSettings:
    """ChatSettings' constructor arguments from stored JSON, and a line for each field that was refused."""

    fields: dict[str, Any]
    problems: tuple[str, ...]


def parse_settings(data: object) -> ParsedSettings:
    """ChatSettings' fields from the stored (flat) JSON object `data`: unknown keys dropped, missing ones
    and refused ones their defaults (each refused one named in `problems`)."""
    problems: list[str] = []
    if not isinstance(data, Mapping):
        problems.append(f"settings must be an object, not {type(data).__name__}: the defaults are used")
        data = {}

    def take(key: str, spec: _Field) -> Any:
        if key not in data:
            return spec.default
        value = data[key]
        if spec.check(value):
            return value
        problems.append(f"setting {key!r} must be {spec.wanted}, not {_shown(value)}: the default "
                        f"{_shown(spec.default)} is used")
        return spec.default

    fields = {name: take(name, spec) for name, spec in CHAT_FIELDS.items()}
    speculation = SpeculativeOptions(**{name: take(key, spec) for name, (key, spec) in SPECULATION_FIELDS.items()})
    torch = TorchOptions(**{name: take(name, spec) for name, spec in TORCH_FIELDS.items()})
    load = {name: fields.pop(name) for name in CHAT_FIELDS if name in LOAD_KEYS}
    fields["load"] = LoadSettings(**load, speculation=speculation, torch=torch)
    if isinstance(fields["temperature"], int):
        fields["temperature"] = float(fields["temperature"])
    if isinstance(fields["top_p"], int):
        fields["top_p"] = float(fields["top_p"])
    for key in ("tool_servers", "allowed_tools"):  # a JSON list; a tuple: the parsed fields are cached and shared
        fields[key] = tuple(fields[key])
    return ParsedSettings(fields, tuple(problems))


def _shown(value: object, limit: int = 40) -> str:
    """A value as a note shows it: JSON-like and short."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and abs(value) >= 10**15:
        return f"a {len(str(abs(value)))}-digit number"
    if isinstance(value, list | tuple):
        return "a list" if value else "[]"
    if isinstance(value, Mapping):
        return "an object"
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
