"""The GGUF backend's memory report: llama.cpp's own buffer sizes, per device, and KV cells in use.

Sizes come from llama.cpp itself, never from a formula: the "model/KV/compute/output buffer
size" lines it logs while loading (captured by LlamaLogBridge), attributed to a device by
the buffer's backend name ("CUDA0" is cuda:0; "CPU", "CPU_Mapped", "CUDA_Host" live in host
RAM). The KV cells in use come from the backend's ledger of the cells its sequences share
(kv_sequences.py); `kv_cells_in_use` reads the same from llama.cpp's memory API (the position span
of every sequence id of the context). The rest of the process and the free memory come from the OS
and the driver (engine.device_memory). The backend hands over its figures through
`GgufBackend.memory_figures()`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from engine.device_memory import DeviceMeter, build_report
from engine.gguf.llama_handle import LlamaHandle
from engine.gguf.log_bridge import BufferSizes
from engine.gguf.prefix_cache import common_prefix_len
from engine.protocol import MemoryReport

_PARTS = ("weights", "kv", "compute")
_NUMBERED = re.compile(r"([A-Za-z]+?)(\d+)")


def device_of(backend_name: str) -> str:
    """The device a llama.cpp buffer lives on, from its backend buffer type's name."""
    if backend_name.startswith("CPU") or backend_name.endswith("_Host"):
        return "cpu"  # plain, mapped, repacked, or pinned host memory
    numbered = _NUMBERED.fullmatch(backend_name)
    if numbered:
        kind, index = numbered.groups()
        return f"{kind.lower()}:{index}"  # CUDA0 -> cuda:0, Vulkan1 -> vulkan:1
    return backend_name.lower()


def parts_by_device(buffers: BufferSizes) -> dict[str, dict[str, int]]:
    """{device: {"weights": bytes, "kv": bytes, "compute": bytes}} from llama.cpp's logged buffers."""
    out: dict[str, dict[str, int]] = {"cpu": dict.fromkeys(_PARTS, 0)}
    for kind in _PARTS:
        for backend_name, nbytes in buffers.by_kind.get(kind, {}).items():
            device = out.setdefault(device_of(backend_name), dict.fromkeys(_PARTS, 0))
            device[kind] += nbytes
    return out


def distinct_prefix_tokens(sequences: Sequence[Sequence[int]]) -> int:
    """Tokens in a trie of `sequences`: every shared prefix counted once."""
    ordered = sorted(tuple(s) for s in sequences)
    total = sum(len(s) for s in ordered)
    # In sorted order, a sequence shares the most with its predecessor.
    return total - sum(common_prefix_len(a, b) for a, b in zip(ordered, ordered[1:], strict=False))


def count_cells(spans: Mapping[int, tuple[int, int]], known: Mapping[int, Sequence[int]], shared: bool) -> int:
    """KV cells in use, from each sequence's (first, last) position.

    Args:
        spans: per sequence id, the positions llama.cpp holds (inclusive).
        known: the tokens of the sequences the backend tracks (from position 0).
        shared: whether sequences can share cells (one unified cache). Sequences that start
            at 0 and whose tokens are known then share their common prefixes; any other
            sequence counts in full.
    """
    total, prefixes = 0, []
    for seq, (first, last) in spans.items():
        n = last - first + 1
        tokens = known.get(seq)
        if shared and first == 0 and tokens is not None and len(tokens) >= n:
            prefixes.append(tuple(tokens[:n]))
        else:
            total += n
    return total + distinct_prefix_tokens(prefixes)


def kv_cells_in_use(llama: LlamaHandle, known: Mapping[int, Sequence[int]], shared: bool) -> int:
    """KV cells holding tokens in a llama.cpp context, over all its sequence ids."""
    spans: dict[int, tuple[int, int]] = {}
    for seq in range(llama.n_seq):
        last = llama.seq_pos_max(seq)
        if last >= 0:
            spans[seq] = (max(0, llama.seq_pos_min(seq)), last)
    return count_cells(spans, known, shared)


@dataclass(slots=True, frozen=True)
class GgufMemoryFigures:
    """What a GgufBackend knows of its memory (GgufBackend.memory_figures)."""

    buffers: BufferSizes | None  # llama.cpp's logged buffers of the loaded model; None: no model
    kv_cells_used: int = 0  # shared cells counted once
    kv_cells_total: int = 0
    prefix_ram_bytes: int = 0
    prefix_disk_bytes: int = 0
    gpu_names: Mapping[str, str] = field(default_factory=dict)  # "cuda:N" -> the card's name as CUDA gives it
    draft_buffers: BufferSizes | None = None  # the draft model's logged buffers (speculative decoding)
    sequence_tokens: tuple[int, ...] = ()  # tokens of each reply slot holding any
    parallel: int = 1  # reply slots
    projector_buffers: BufferSizes | None = None  # a multimodal projector's logged weights and compute buffer


def gguf_memory_report(figures: GgufMemoryFigures, meter: DeviceMeter) -> MemoryReport:
    """The report of a GgufBackend's figures, with what the OS and the driver say (`meter`)."""
    if figures.buffers is None:
        return build_report({"cpu": {}}, meter, 0, 0, figures.prefix_ram_bytes, figures.prefix_disk_bytes)
    parts = parts_by_device(figures.buffers)
    if figures.draft_buffers is not None:  # one part of its own per device, beside the model's
        for device, draft in parts_by_device(figures.draft_buffers).items():
            parts.setdefault(device, dict.fromkeys(_PARTS, 0))["draft"] = sum(draft.values())
    if figures.projector_buffers is not None:
        for device, projector in parts_by_device(figures.projector_buffers).items():
            if total := sum(projector.values()):
                parts.setdefault(device, dict.fromkeys(_PARTS, 0))["projector"] = total
    report = build_report(
        parts, meter, figures.kv_cells_used, figures.kv_cells_total,
        figures.prefix_ram_bytes, figures.prefix_disk_bytes, gpu_names=figures.gpu_names,
    )
    return replace(report, kv_sequence_tokens=figures.sequence_tokens, parallel=figures.parallel)
