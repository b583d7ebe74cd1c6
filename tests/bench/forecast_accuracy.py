"""Forecast vs llama.cpp: weights, KV cache and compute buffer, per case, and the worst error.

Models: the starter model (SmolLM2-135M Q4_1, tied output), two tiny llama models made here
with other shapes (GQA 4/2 with its own output layer; no GQA, wider), and the family corpus
(tests/fixtures/tiny_families.py: llama, qwen2, qwen3, gemma3 with its sliding window and
262k vocabulary, phi3, qwen3moe, mixtral), each quantized by llama.cpp to Q8_0, Q6_K, Q4_K_M
and IQ4_XS. Contexts 2k, 8k and 32k; KV f16 (flash attention off and on) and q8_0 (flash
attention on, which a quantized V cache needs); all layers on the CPU, with the repacked
weights llama.cpp's CPU backend here makes. Target: every part within 5%.

    python -m tests.bench.forecast_accuracy
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

from engine.gguf.devices import read_devices
from engine.starter import starter_model_path
from models.formats.gguf_header import read_gguf_header
from models.plan.cpu_repack import cpu_repack_of
from models.plan.forecast import ForecastSettings, forecast, shape_from_gguf
from tests.fixtures.llama_buffers import LlamaBufferProbe
from tests.fixtures.tiny_families import corpus
from tests.fixtures.tiny_gguf import TinySpec, borrow_tokenizer, write_tiny_llama

CONTEXTS = (2048, 8192, 32768)
KV_CONFIGS = (("f16", False), ("f16", True), ("q8_0", True))
TINY = {
    "tiny-gqa": TinySpec(n_layers=4, n_embd=128, n_heads=4, n_kv_heads=2, n_ff=256, n_ctx_train=32768),
    "tiny-mha": TinySpec(n_layers=6, n_embd=256, n_heads=8, n_kv_heads=8, n_ff=768, n_ctx_train=32768),
}
PARTS = (("weights", "weights_bytes"), ("kv", "kv_cache_bytes"), ("compute", "compute_bytes"))


def models(tmp: Path, families: bool = True) -> dict[str, Path]:
    starter = starter_model_path()
    tokenizer = borrow_tokenizer(starter)
    out = {"smollm2-135m-q4_1": starter}
    for name, spec in TINY.items():
        out[name] = write_tiny_llama(tmp / f"{name}.gguf", spec, tokenizer)
    if families:
        out.update(corpus(tmp / "families", tokenizer))
    return out


def measure(path: Path, settings: ForecastSettings, probe: LlamaBufferProbe) -> dict[str, tuple[int, int]]:
    """{part: (forecast, llama.cpp's own figure)} for one model and settings, all on the CPU."""
    measured = probe.measure(path, settings)
    cpu = forecast(shape_from_gguf(read_gguf_header(path)), settings).devices["cpu"]
    return {part: (getattr(cpu, attr), measured.total(part)) for part, attr in PARTS}


def rows(files: dict[str, Path], contexts=CONTEXTS, kv_configs=KV_CONFIGS) -> Iterator[tuple]:
    """(model, settings, {part: (forecast, measured)}) for every case."""
    probe = LlamaBufferProbe()
    repack = cpu_repack_of(read_devices())
    for name, path in files.items():
        # A sliding-window model is measured with llama.cpp's full-size cache (the engine's default)
        # and with the windowed one the plan falls back to when memory is short.
        windowed = (True, False) if shape_from_gguf(read_gguf_header(path)).sliding_window else (True,)
        for n_ctx in contexts:
            for kv, fa in kv_configs:
                for swa_full in windowed:
                    settings = ForecastSettings(n_ctx=n_ctx, kv_type=kv, flash_attn=fa, repack_types=repack,
                                                swa_full=swa_full)
                    yield name, settings, measure(path, settings, probe)


def relative_error(predicted: int, actual: int) -> float:
    return abs(predicted - actual) / actual if actual else float(predicted != 0)


def main() -> None:
    worst, worst_case, n = 0.0, "", 0
    mib = 1024 * 1024
    print(f"{'model':<28}{'ctx':>7} {'kv':<5}{'fa':<4}" + "".join(f"{p + ' fc/real MiB':>28}" for p, _ in PARTS))
    with tempfile.TemporaryDirectory() as tmp:
        for name, s, parts in rows(models(Path(tmp))):
            n += 1
            cells = []
            for part, _ in PARTS:
                predicted, actual = parts[part]
                err = relative_error(predicted, actual)
                if err > worst:
                    worst, worst_case = err, f"{name} {s.n_ctx} {s.kv_type} fa={s.flash_attn} swa_full={s.swa_full} {part}"
                cells.append(f"{predicted / mib:9.1f}/{actual / mib:9.1f} ({err:5.1%})")
            label = name if s.swa_full else f"{name} (swa window)"
            print(f"{label:<28}{s.n_ctx:>7} {s.kv_type:<5}{'on' if s.flash_attn else 'off':<4}" + "".join(
                f"{c:>28}" for c in cells), flush=True)
    print(f"forecast_worst_relative_error={worst:.3%} over {n} cases (target <= 5%; worst: {worst_case})")


if __name__ == "__main__":
    main()
