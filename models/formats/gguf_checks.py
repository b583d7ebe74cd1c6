"""Checks of the GGUF hyperparameters the memory forecast is built on: sliding window and experts.

A header can be well-formed GGUF and still hold values no model has: a sliding window of 0 tokens
on sliding-window layers, a layer pattern of the wrong length, 2**31 experts. llama.cpp aborts on
some of these (GGML_ASSERT) and silently misbehaves on others; the forecast would turn them into
nonsense. Each is refused here with the key and the value named. What is legal follows llama.cpp
(src/llama-model.cpp, src/models/<arch>.cpp), so that no real model is refused.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from models.formats.errors import InvalidModelFile
from models.formats.gguf_parse import GgufArray
from models.formats.tensor_info import TensorInfo

UINT32_MAX = (1 << 32) - 1
LLAMA_MAX_EXPERTS = 1024  # llama-hparams.h; llama.cpp asserts expert_count <= this when loading

# Architectures where llama.cpp applies the window on its sliding-window layers whatever the file
# says, so a window of 0 masks every token (gemma2, cohere2, gpt-oss: no pattern key needed). For
# the others (gemma3, olmo2, mellum...) 0 or no key means no sliding window at all.
ALWAYS_SWA = frozenset({"gemma2", "gemma3n", "gemma4", "cohere2", "cohere2moe", "granite_swa", "gpt-oss"})
# Architectures whose window llama.cpp does not take as a size: phi3 turns SWA off (Phi-3 128k
# files carry a window of 262144 over a context of 131072), llama4 uses chunks of 8192 instead.
WINDOW_NOT_USED = frozenset({"phi3", "llama4"})
# Dense models converted as MoE: llama.cpp drops expert_count <= 1 (and the used count) for these.
DENSE_IF_ONE_EXPERT = frozenset({"hunyuan-dense", "hunyuan_vl"})
# The routed experts' weights, one slice per expert (shared experts are *_shexp, not counted).
EXPERT_TENSOR = re.compile(r"blk\.\d+\.ffn_(gate|up|down|gate_up)_exps\.weight")


class CheckedHeader(Protocol):
    """What the checks read of a header: GgufHeader (gguf_header.py) runs them on itself as it is read."""

    source: str
    metadata: dict[str, Any]
    tensors: tuple[TensorInfo, ...]

    @property
    def architecture(self) -> Any: ...


def check_hparams(header: CheckedHeader) -> None:
    """Refuse sliding-window and expert values that no model has.

    Raises:
        InvalidModelFile: The first bad value, naming its key and the value.
    """
    arch = header.architecture
    if not isinstance(arch, str):
        return  # no architecture: llama.cpp refuses the file, and no `{arch}.` key can be read
    checks = _Checks(header, arch)
    checks.sliding_window()
    checks.swa_pattern()
    checks.experts()


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Checks:
    """The checks of one header; `fail` names the file."""

    def __init__(self, header: CheckedHeader, arch: str):
        self.header = header
        self.arch = arch
        self.md = header.metadata

    def key(self, name: str) -> str:
        return f"{self.arch}.{name}"

    def fail(self, problem: str) -> InvalidModelFile:
        return InvalidModelFile(self.header.source, problem)

    def uint32(self, name: str, what: str) -> int | None:
        """The value of `{arch}.{name}` when it is a uint32 (None when absent); refused otherwise."""
        key = self.key(name)
        value = self.md.get(key)
        if value is None:
            return None
        if not _is_int(value):
            raise self.fail(f"{key} is {_show(value)}: it must be a whole number of {what}")
        if not 0 <= value <= UINT32_MAX:
            raise self.fail(f"{key} is {value}: it must be between 0 and {UINT32_MAX} {what}")
        return value

    def sliding_window(self) -> None:
        key = self.key("attention.sliding_window")
        window = self.uint32("attention.sliding_window", "tokens")
        if window is None:
            return
        pattern_key = self.key("attention.sliding_window_pattern")
        if window == 0 and (pattern_key in self.md or self.arch in ALWAYS_SWA):
            where = f"{pattern_key} is set" if pattern_key in self.md else f"{self.arch} always has sliding-window layers"
            raise self.fail(f"{key} is 0 but {where}: a window of 0 tokens would mask every token")
        ctx_key = self.key("context_length")
        n_ctx = self.md.get(ctx_key)
        if _is_int(n_ctx) and 0 < n_ctx < window and self.arch not in WINDOW_NOT_USED:
            raise self.fail(f"{key} is {window}, larger than the trained context ({ctx_key} = {n_ctx})")

    def swa_pattern(self) -> None:
        key = self.key("attention.sliding_window_pattern")
        pattern = self.md.get(key)
        if pattern is None:
            return
        if _is_int(pattern):  # a period: the last layer of every `pattern` has full attention
            self.uint32("attention.sliding_window_pattern", "layers")
            return
        if not isinstance(pattern, tuple | GgufArray):
            raise self.fail(f"{key} is {_show(pattern)}: it must be one bool per block, or a period in layers")
        n_layers = self.md.get(self.key("block_count"))
        if _is_int(n_layers) and len(pattern) != n_layers:
            raise self.fail(
                f"{key} has {len(pattern)} entries, not one per block ({self.key('block_count')} = {n_layers})"
            )
        items = pattern.head if isinstance(pattern, GgufArray) else pattern
        for i, item in enumerate(items):
            if not (isinstance(item, bool) or _is_int(item) and item in (0, 1)):
                raise self.fail(f"{key}[{i}] is {_show(item)}: each entry must be a bool (sliding window or not)")

    def experts(self) -> None:
        count_key, used_key = self.key("expert_count"), self.key("expert_used_count")
        n_expert = self.uint32("expert_count", "experts")
        if n_expert is not None and n_expert > LLAMA_MAX_EXPERTS:
            raise self.fail(f"{count_key} is {n_expert}: more than llama.cpp's limit of {LLAMA_MAX_EXPERTS} experts")
        used = self.md.get(used_key)
        used_max = self._used_max(used_key, used)
        experts = n_expert or 0
        if self.arch in DENSE_IF_ONE_EXPERT and experts <= 1:
            return
        if experts == 0:
            count = "missing" if n_expert is None else "0"
            if used_max:
                raise self.fail(f"{used_key} is {_show(used)} but {count_key} is {count}: no experts to route to")
            expert_tensor = next((t.name for t in self.header.tensors if EXPERT_TENSOR.fullmatch(t.name)), None)
            if expert_tensor is not None:
                raise self.fail(f"{count_key} is {count} but the file holds expert weights ({expert_tensor!r})")
            return
        if not used_max:
            shown = "missing" if used is None else _show(used)
            raise self.fail(
                f"{used_key} is {shown} with {count_key} = {experts}: each token must be routed to at least one expert"
            )
        if used_max > experts:
            raise self.fail(f"{used_key} is {_show(used)}, more than {count_key} = {experts}")

    def _used_max(self, key: str, used: Any) -> int:
        """The largest experts-per-token count: one for all layers, or one per layer (0 on dense ones)."""
        if used is None:
            return 0
        if _is_int(used):
            return self.uint32("expert_used_count", "experts") or 0
        if not isinstance(used, tuple):
            raise self.fail(f"{key} is {_show(used)}: it must be a whole number of experts, or one per block")
        n_layers = self.md.get(self.key("block_count"))
        if _is_int(n_layers) and len(used) != n_layers:
            raise self.fail(f"{key} has {len(used)} entries, not one per block ({self.key('block_count')} = {n_layers})")
        for i, item in enumerate(used):
            if not _is_int(item) or not 0 <= item <= UINT32_MAX:
                raise self.fail(f"{key}[{i}] is {_show(item)}: it must be a whole number of experts")
        return max(used, default=0)


def _show(value: Any) -> str:
    """A value as an error message quotes it: short, with its Python type visible."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
