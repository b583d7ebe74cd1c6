"""What a LoadRequest asks of llama.cpp, checked before anything is loaded; the default thread count."""

from __future__ import annotations

import os

import psutil

from engine.backend import BackendError
from engine.gguf.llama_handle import MAX_DEVICES
from engine.protocol import LoadRequest
from models.plan.layer_split import split_points

# ggml type ids of the KV cache types offered.
KV_CACHE_TYPES = {"f16": 1, "q8_0": 8, "q4_0": 2}


def check_load_request(request: LoadRequest) -> int:
    """The ggml type of the request's KV cache; a bad_request for settings llama.cpp cannot honour."""
    kv_type = KV_CACHE_TYPES.get(request.kv_type)
    if kv_type is None:
        raise BackendError("bad_request", f"Unknown KV cache type {request.kv_type!r}: use f16, q8_0 or q4_0.")
    if request.kv_type != "f16" and not request.flash_attn:
        raise BackendError("bad_request", f"A {request.kv_type} KV cache needs flash attention on.")
    check_tensor_split(request.tensor_split)
    if request.speculation.mode == "draft" and not request.speculation.draft_path:
        raise BackendError("bad_request", "Speculative decoding with a draft model needs the draft's GGUF file.")
    return kv_type


def check_tensor_split(tensor_split: tuple[float, ...]) -> None:
    """A tensor_split llama.cpp can take (a share per GPU, at most its device limit), else a bad_request."""
    try:
        split_points(tensor_split)
    except ValueError as exc:
        raise BackendError("bad_request", f"Bad tensor_split {list(tensor_split)}: {exc}.") from None
    if len(tensor_split) > MAX_DEVICES:
        raise BackendError("bad_request", f"Bad tensor_split {list(tensor_split)}: llama.cpp takes at most "
                                          f"{MAX_DEVICES} GPUs.")


def default_threads() -> int:
    # Physical cores decode fastest; hyper-threads only add contention.
    return max(1, psutil.cpu_count(logical=False) or os.cpu_count() or 1)
