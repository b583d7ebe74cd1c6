"""The body of POST /v1/embeddings, checked into plain data: every bad field a 400 that names it.

OpenAI takes `input` as a string, an array of strings, an array of token ids, or an array of such arrays;
token ids here are the model's own (not tiktoken's), as llama-server takes them. `encoding_format` is "float"
or "base64" (the `openai` SDK asks for base64 unless told otherwise). `dimensions` asks for shorter vectors,
which only models trained for it (Matryoshka) can give: it is refused, naming the model's own width. `user`
changes nothing. Any other field is refused, as field_policy.py refuses one it does not know.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from app.server.errors import ApiError, bad_param
from engine.protocol import ModelInfo

# Inputs one request may carry, as OpenAI's API allows (an array of at most 2,048).
MAX_INPUTS = 2048
# Characters of text all inputs together may hold: far more than any model embeds (a 2,048-input request of
# 8k-token chunks is ~64 MB of text), so a request is refused before its tokens are counted, not after.
MAX_TOTAL_CHARS = 16 << 20
EncodingFormat = Literal["float", "base64"]
_FIELDS = frozenset({"input", "model", "encoding_format", "dimensions", "user"})


@dataclass(slots=True, frozen=True)
class EmbeddingParams:
    """One checked request: its inputs (text, or the model's token ids), how vectors are sent, the model named."""

    inputs: tuple[str | tuple[int, ...], ...]
    encoding: EncodingFormat
    model: str | None


def parse_embedding(body: Any, model: ModelInfo | None) -> EmbeddingParams:
    """The request checked; `model` is the one it reaches where known (named in a refusal of `dimensions`)."""
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    for name in body:
        if name not in _FIELDS:
            raise bad_param(name, f"'{name}' is not a field of an embeddings request this server knows.")
    name = body.get("model")
    if name is not None and not isinstance(name, str):
        raise bad_param("model", "'model' must be a string.")
    encoding = body.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        raise bad_param("encoding_format", "'encoding_format' must be \"float\" or \"base64\".")
    if body.get("dimensions") is not None:
        raise bad_param("dimensions", _no_dimensions(model))
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise bad_param("user", "'user' must be a string.")
    return EmbeddingParams(parse_inputs(body.get("input")), encoding, name)


def parse_inputs(value: Any, field: str = "input") -> tuple[str | tuple[int, ...], ...]:
    """`input` as a tuple of inputs: text, or token ids. At most MAX_INPUTS, none empty."""
    if isinstance(value, str):
        items: list[Any] = [value]
    elif isinstance(value, list) and value and all(_is_token(t) for t in value):
        items = [value]  # one input of token ids
    elif isinstance(value, list) and value:
        items = value
    elif isinstance(value, list):
        raise bad_param(field, f"'{field}' is an empty array: give at least one text to embed.")
    else:
        raise bad_param(field, f"'{field}' must be a string, an array of strings, an array of token ids, "
                               "or an array of such arrays.")
    if len(items) > MAX_INPUTS:
        raise bad_param(field, f"'{field}' holds {len(items):,} inputs; a request may hold at most {MAX_INPUTS:,}. "
                               "Send them in several requests.")
    inputs: list[str | tuple[int, ...]] = []
    chars = 0
    for i, item in enumerate(items):
        where = f"{field}[{i}]" if isinstance(value, list) and items is value else field
        if isinstance(item, str):
            if not item:
                raise bad_param(where, f"'{where}' is an empty string: there is nothing to embed.")
            chars += len(item)
            inputs.append(item)
        elif isinstance(item, list) and item and all(_is_token(t) for t in item):
            inputs.append(tuple(item))
        elif isinstance(item, list) and not item:
            raise bad_param(where, f"'{where}' is an empty array of token ids: there is nothing to embed.")
        else:
            raise bad_param(where, f"'{where}' must be a string or an array of token ids (integers from 0).")
    if chars > MAX_TOTAL_CHARS:
        raise bad_param(field, f"'{field}' holds {chars:,} characters; a request may hold at most "
                               f"{MAX_TOTAL_CHARS:,}. Send them in several requests.")
    return tuple(inputs)


def _is_token(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _no_dimensions(model: ModelInfo | None) -> str:
    width = f"{model.n_embd}-dimensional vectors" if model is not None and model.n_embd else "vectors of its own width"
    name = f"'{model.name}'" if model is not None else "The model"
    return (f"'dimensions' is not supported: {name} makes {width} and was not trained to shorten them (a "
            "Matryoshka model). Leave it out, or cut and renormalize the vectors yourself.")
