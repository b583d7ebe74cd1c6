"""Forecast vs llama.cpp: weights, KV cache and compute buffer, per case, and the worst error.

Models: the starter model (SmolLM2-135M Q4_1, tied output) and two tiny llama models made
here with other shapes (GQA 4/2 with its own output layer; no GQA, wider). Contexts 2k,
8k and 32k; KV f16 (flash attention off and on) and q8_0 (flash attention on, which a
quantized V cache needs). Target: every part within 5%.

    python -m tests.bench.forecast_accuracy
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from engine.starter import starter_model_path
from models.forecast import ForecastSettings, forecast, shape_from_gguf
from models.gguf_header import read_gguf_header
from tests.fixtures.llama_buffers import LlamaBufferProbe
from tests.fixtures.tiny_gguf import TinySpec, borrow_tokenizer, write_tiny_llama

CONTEXTS = (2048, 8192, 32768)
KV_CONFIGS = (("f16", False), ("f16", True), ("q8_0", True))
TINY = {
    "tiny-gqa": TinySpec(n_layers=4, n_embd=128, n_heads=4, n_kv_heads=2, n_ff=256, n_ctx_train=32768),
    "tiny-mha": TinySpec(n_layers=6, n_embd=256, n_heads=8, n_kv_heads=8, n_ff=768, n_ctx_train=32768),
}
PARTS = (("weights", "weights_bytes"), ("kv", "kv_cache_bytes"), ("compute", "compute_bytes"))


def models(tmp: Path) -> dict[str, Path]:
    starter = starter_model_path()
    tokenizer = borrow_tokenizer(starter)
    out = {"smollm2-135m-q4_1": starter}
    for name, spec in TINY.items():
        out[name] = write_tiny_llama(tmp / f"{name}.gguf", spec, tokenizer)
    return out


def rows(tmp: Path, contexts=CONTEXTS, kv_configs=KV_CONFIGS):
    """(model, settings, {part: (forecast, measured)}) for every case."""
    probe = LlamaBufferProbe()
    for name, path in models(tmp).items():
        shape = shape_from_gguf(read_gguf_header(path))
        for n_ctx in contexts:
            for kv, fa in kv_configs:
                settings = ForecastSettings(n_ctx=n_ctx, kv_type=kv, flash_attn=fa)
                measured = probe.measure(path, settings)
                cpu = forecast(shape, settings).devices["cpu"]
                yield name, settings, {
                    part: (getattr(cpu, attr), measured.total(part)) for part, attr in PARTS
                }


def relative_error(predicted: int, actual: int) -> float:
    return abs(predicted - actual) / actual if actual else float(predicted != 0)


def main() -> None:
    worst = 0.0
    mib = 1024 * 1024
    print(f"{'model':<20}{'ctx':>7} {'kv':<5}{'fa':<4}" + "".join(f"{p + ' fc/real MiB':>28}" for p, _ in PARTS))
    with tempfile.TemporaryDirectory() as tmp:
        for name, s, parts in rows(Path(tmp)):
            cells = []
            for part, _ in PARTS:
                predicted, actual = parts[part]
                err = relative_error(predicted, actual)
                worst = max(worst, err)
                cells.append(f"{predicted / mib:9.1f}/{actual / mib:9.1f} ({err:5.1%})")
            print(f"{name:<20}{s.n_ctx:>7} {s.kv_type:<5}{'on' if s.flash_attn else 'off':<4}" + "".join(
                f"{c:>28}" for c in cells))
    print(f"forecast_worst_relative_error={worst:.3%} (target <= 5%)")


if __name__ == "__main__":
    main()
