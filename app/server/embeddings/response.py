"""OpenAI's answer to POST /v1/embeddings, written from the engine's Embeddings.

    {"object": "list", "model": ..., "data": [{"object": "embedding", "index": 0, "embedding": [...]}, ...],
     "usage": {"prompt_tokens": n, "total_tokens": n}}

An embedding is an array of numbers, or with encoding_format "base64" the base64 of its little-endian float32
bytes (what the engine sends, as is). Numbers are written with 9 significant digits, which give back every
float32 exactly, and the body is built as text: 2,048 vectors of 1,024 numbers are 2 million of them.
"""

from __future__ import annotations

import base64
import json
import math

from app.server.embeddings.params import EncodingFormat
from app.server.errors import ApiError
from engine.protocol import Embeddings


def embeddings_body(answer: Embeddings, model: str, encoding: EncodingFormat) -> bytes:
    """The JSON body of the answer; ApiError (500) where a vector holds a value JSON cannot (a broken model)."""
    items = []
    for i, vector in enumerate(answer.vectors):
        if encoding == "base64":
            embedding = json.dumps(base64.b64encode(vector).decode("ascii"))
        else:
            floats = answer.floats(i)
            if not all(map(math.isfinite, floats)):
                raise ApiError(500, f"The model's vector for input {i} holds a value that is not a finite number.",
                               "server_error")
            embedding = "[" + ",".join(f"{x:.9g}" for x in floats) + "]"
        items.append(f'{{"object":"embedding","index":{i},"embedding":{embedding}}}')
    tokens = sum(answer.tokens)
    usage = json.dumps({"prompt_tokens": tokens, "total_tokens": tokens})
    head = f'{{"object":"list","model":{json.dumps(model)},"data":['
    return (head + ",".join(items) + f'],"usage":{usage}}}').encode("utf-8")
