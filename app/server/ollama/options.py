"""Ollama's `options` as the engine's SamplingParams.

Honoured: temperature, top_p, top_k, num_predict, stop, seed, and num_ctx up to the context the model is
loaded with (a larger one is a 400 naming that context: the model is not reloaded per request). The rest
of Ollama's options (repeat_penalty, min_p, num_gpu, num_thread...) are type-checked as Ollama checks
them and have no effect here: the sampler has no such knobs, and the model is loaded as the server's plan
says. Options Ollama does not know are ignored, as Ollama ignores them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.server.errors import ApiError, bad_param
from app.services.chat_defaults import DEFAULT_TEMPERATURE, DEFAULT_TOP_P
from engine.protocol import SamplingParams

MAX_STOP_STRINGS = 16
MAX_STOP_LENGTH = 256
_INT, _FLOAT, _BOOL, _STRINGS = "integer", "number", "boolean", "array of strings"
HONOURED = {"temperature": _FLOAT, "top_p": _FLOAT, "top_k": _INT, "num_predict": _INT, "stop": _STRINGS,
            "seed": _INT, "num_ctx": _INT}
# Ollama's other options (api.Options and api.Runner): checked for their type, without effect here.
NO_EFFECT = {"num_keep": _INT, "min_p": _FLOAT, "typical_p": _FLOAT, "repeat_last_n": _INT,
             "repeat_penalty": _FLOAT, "presence_penalty": _FLOAT, "frequency_penalty": _FLOAT,
             "num_batch": _INT, "num_gpu": _INT, "main_gpu": _INT, "use_mmap": _BOOL, "num_thread": _INT,
             "draft_num_predict": _INT}


@dataclass(slots=True, frozen=True)
class Options:
    sampling: SamplingParams
    no_effect: tuple[str, ...]  # options that were set and changed nothing (the reply says so in a header)


def parse_options(value: Any, n_ctx: int) -> Options:
    """The request's `options` for a model loaded with a context of `n_ctx` tokens."""
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise bad_param("options", "'options' must be an object, such as {\"temperature\": 0.2}.")
    options = {k: v for k, v in value.items() if v is not None}
    for name, kind in (HONOURED | NO_EFFECT).items():
        if name in options:
            options[name] = _typed(options[name], kind, f"options.{name}")
    temperature = options.get("temperature", DEFAULT_TEMPERATURE)
    if temperature < 0:
        raise bad_param("options.temperature", "'options.temperature' must be 0 (greedy) or more.")
    top_p = options.get("top_p", DEFAULT_TOP_P)
    if not 0 < top_p <= 1:
        raise bad_param("options.top_p", "'options.top_p' must be above 0 and at most 1.")
    top_k = options.get("top_k", SamplingParams().top_k)
    if not 0 <= top_k < 1 << 31:  # llama.cpp takes a 32-bit count
        raise bad_param("options.top_k", "'options.top_k' must be 0 (no limit) or a positive number of tokens.")
    num_ctx = options.get("num_ctx", 0)
    if num_ctx > n_ctx:
        raise ApiError(400, f"options.num_ctx asks for a context of {num_ctx} tokens; this model is loaded with "
                            f"{n_ctx} here. Send num_ctx {n_ctx} or less, or leave it out (restart `tailor serve` "
                            "with a larger --ctx for more).", param="options.num_ctx", code="context_length_exceeded")
    # Ollama's num_predict: a positive cap; 0 or negative, until the model stops or the context is full.
    num_predict = options.get("num_predict", -1)
    seed = options.get("seed")
    sampling = SamplingParams(
        temperature=temperature, top_p=top_p, top_k=top_k,
        max_tokens=min(num_predict, n_ctx) if num_predict > 0 else n_ctx,
        seed=None if seed is None else seed % (1 << 32),  # llama.cpp takes a 32-bit seed
        stop=_stop(options.get("stop")),
    )
    return Options(sampling, tuple(sorted(name for name in options if name in NO_EFFECT)))


def _typed(value: Any, kind: str, param: str) -> Any:
    if kind == _BOOL and isinstance(value, bool):
        return value
    if kind == _STRINGS and isinstance(value, str):
        return [value]
    if kind == _STRINGS and isinstance(value, list) and all(isinstance(s, str) for s in value):
        return value
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if kind == _INT and number and (isinstance(value, int) or value.is_integer()):
        return int(value)
    if kind == _FLOAT and number and abs(value) < 1e300:  # an integer past a double (10**400) is no number here
        return float(value)
    raise bad_param(param, f"'{param}' must be {'an' if kind[0] in 'aeiou' else 'a'} {kind}.")


def _stop(stops: list[str] | None) -> tuple[str, ...]:
    if not stops:
        return ()
    if len(stops) > MAX_STOP_STRINGS or not all(0 < len(s) <= MAX_STOP_LENGTH for s in stops):
        raise bad_param("options.stop", f"'options.stop' must be up to {MAX_STOP_STRINGS} non-empty strings of at "
                                        f"most {MAX_STOP_LENGTH} characters.")
    return tuple(stops)
