"""PyTorch engine on the CPU: figures measured side by side on the starter model's fp32 weights.

The starter GGUF (SmolLM2-135M) is dequantized into a dense Hugging Face folder first. Then:
  - decode tok/s, greedy, batch 1: `tailor chat --speculative off` vs transformers' generate() on the
    same weights and prompt, each in a fresh process started with the user's environment (no OpenMP
    settings of ours: transformers runs on its defaults, the engine chooses its own), alternating;
  and, inside this process, on the engine's own OpenMP choice:
  - aggregate tok/s with 8 concurrent streams vs 1 (continuous batching);
  - TTFT of a request sharing a 1,024-token prefix with a finished one, vs cold (prefix caching);
  - prompt-lookup speculative decoding on a rewrite-the-input task vs plain greedy (same output).
On a CUDA device (skipped, with a line saying so, elsewhere):
  - AWQ int4 decode tok/s of a 1.1B Llama vs its bandwidth limit (weight bytes read per token x tok/s
    / peak bandwidth) and vs the same model in dense fp16. The model has TinyLlama-1.1B's shape and
    random weights (decode speed does not depend on the values; nothing is downloaded), unless
    TAILOR_BENCH_GPU_DENSE and TAILOR_BENCH_GPU_AWQ name a real dense folder and its AWQ copy.
    The peak is TAILOR_BENCH_PEAK_GBS (the card's spec sheet, GB/s; models/hardware/gpu_catalog.py has no
    bandwidths) or else a measured device-to-device copy (what the memory achieves, below the spec).

    python -m tests.bench.torch_engine      # TAILOR_BENCH_THREADS (default 2)
"""

# ruff: noqa: E402 - torch (and every engine module that imports it) must load after the OpenMP choice

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from engine.openmp_policy import choose_openmp_wait_policy

# The engine-internal figures below run in this process: with the OpenMP policy the engine process
# chooses (engine/host.py), before torch loads. The comparison with transformers runs both sides in
# processes of their own (bench_decode_vs_transformers).
choose_openmp_wait_policy(os.environ)

import torch
import torch.nn.functional as F

from engine.protocol import ChatMessage
from engine.starter import starter_model_path
from engine.torch.arch import CausalLM, load_model
from engine.torch.attention import KVCache
from engine.torch.awq import DenseLinear
from engine.torch.config import EngineConfig
from engine.torch.hf_tokenizer import HfTokenizer
from engine.torch.llm_engine import LLMEngine
from engine.torch.model_runner import ModelRunner
from engine.torch.sequence import SamplingOptions
from engine.torch.speculative import PromptLookupDrafter, SpeculativeRunner
from tests.fixtures.gguf_to_hf import convert
from tests.fixtures.tiny_hf import write_awq_copy, write_tiny_model

THREADS = int(os.environ.get("TAILOR_BENCH_THREADS", "2"))
REPO = Path(__file__).resolve().parents[2]
# Tokens of the reply `tailor chat` is asked for (greedy: the starter model tells a story this long).
PRODUCT_TOKENS = 128
STORY = "Tell me a long story about a fox who learns to sail."
DECODE_TOKENS = 32
ROUNDS = 3
BLOCKS = 512
REWRITE = (
    "Rewrite the following paragraph with every spelling mistake corrected, and change nothing else:\n\n"
    "Yesterday the old fisherman walked slowly to the harbor. He checked his nets, fixed a smal tear, and "
    "loaded the boat with bread, water and a warm coat. The sea was calm and the sky was clear, so he "
    "sailed out past the lighthouse before the sun was high. By noon he had caught enough fish for the "
    "whole vilage, and he sang as he rowed back home."
)


def make_engine(model: CausalLM, k: int = 0, seqs: int = 8,
                cuda_graphs: bool | None = None) -> tuple[LLMEngine, SpeculativeRunner | None]:
    """An engine over `model`; `cuda_graphs` None: the runner's default (on for CUDA)."""
    c = model.config
    config = EngineConfig(
        num_kv_blocks=BLOCKS, block_size=16, max_num_seqs=seqs, max_num_batched_tokens=2048,
        max_model_len=2048, num_speculative_tokens=k,
    )
    kv = KVCache(c.num_layers, BLOCKS, 16, c.num_kv_heads, c.head_dim, model.dtype, model.device)
    runner = ModelRunner(model, kv, config, cuda_graphs=cuda_graphs)
    if k == 0:
        return LLMEngine(config, runner), None
    spec = SpeculativeRunner(runner, PromptLookupDrafter())
    return LLMEngine(config, spec), spec


def timed_generate(engine: LLMEngine, prompts: list[list[int]], max_tokens: int) -> tuple[list[list[int]], float, float]:
    """Completions, time to the first token of the first request, and the time after it."""
    options = SamplingOptions(max_tokens=max_tokens, ignore_eos=True)
    ids = [engine.add_request(p, options) for p in prompts]
    t0 = time.perf_counter()
    first = None
    while engine.has_unfinished():
        outs = engine.step()
        if first is None and any(o.token_id is not None for o in outs):
            first = time.perf_counter()
    end = time.perf_counter()
    return [engine.get_sequence(i).completion_token_ids if engine.get_sequence(i) else [] for i in ids], first - t0, end - first


def chat_ids(tok: HfTokenizer, text: str) -> list[int]:
    return tok.encode(tok.template.render([ChatMessage("user", text)]))


def clean_env(tailor_home: Path) -> dict[str, str]:
    """The environment a user's shell gives a program: ours without OpenMP settings (the engine chooses
    its own, transformers runs on its defaults), and Tailor's folders in `tailor_home`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_", "KMP_", "TAILOR_"))}
    env["TAILOR_HOME"] = str(tailor_home)
    env["PYTHONPATH"] = str(REPO)
    return env


def json_line(cmd: list[str], env: dict[str, str]) -> dict:
    """Run `cmd` to the end; the last line of its stdout, which is JSON."""
    done = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def product_decode(directory: Path, text: str, env: dict[str, str]) -> dict:
    """`tailor chat --model DIR --speculative off` as a user runs it: one reply, its --json figures."""
    return json_line([sys.executable, "-m", "app.launcher", "chat", "--model", str(directory), "--speculative", "off",
                      "--system", "", "--temperature", "0", "--max-tokens", str(PRODUCT_TOKENS), "--json", text], env)


def transformers_decode(directory: Path, prompt: list[int], n: int, env: dict[str, str]) -> dict:
    """transformers' generate() on the same weights and prompt, n tokens, in a process of its own."""
    return json_line([sys.executable, "-m", "tests.fixtures.transformers_decode", str(directory), str(n),
                      json.dumps(prompt)], env)


def bench_decode_vs_transformers(directory: Path, model: CausalLM, tok: HfTokenizer, tmp: Path) -> None:
    """The product (`tailor chat`) vs transformers generate(), each in its own process started with the
    user's environment, alternating ROUNDS times so both see the same machine load."""
    text = STORY
    prompt = chat_ids(tok, text)
    env = clean_env(tmp / "tailor-home")
    ours, ref = [], []
    for r in range(ROUNDS):
        product = product_decode(directory, text, env)
        if product["prompt_tokens"] != len(prompt):
            raise RuntimeError(f"the product's prompt has {product['prompt_tokens']} tokens, the baseline's {len(prompt)}")
        baseline = transformers_decode(directory, prompt, product["gen_tokens"], env)
        ours.append(product["decode_tok_s"])
        ref.append(baseline["decode_tok_s"])
        print(f"  round {r + 1}: tailor chat {ours[-1]:.1f} tok/s, transformers generate() {ref[-1]:.1f} tok/s "
              f"({product['gen_tokens']} tokens after a {len(prompt)}-token prompt): {ours[-1] / ref[-1]:.2f}x; "
              f"load average {os.getloadavg()[0]:.1f} (another program busy makes both slower, and "
              f"transformers' spinning threads far slower)")
    print(f"decode tok/s, batch 1, greedy, fp32, each in its own process as a user runs it: `tailor chat "
          f"--speculative off` {max(ours):.1f}, transformers generate() (defaults, {baseline['threads']} threads) "
          f"{max(ref):.1f}: {max(ours) / max(ref):.2f}x (best of {ROUNDS} alternating runs each; median of the "
          f"rounds' ratios {statistics.median(o / f for o, f in zip(ours, ref, strict=True)):.2f}x)")
    floor = weight_matmuls_s(model)
    print(f"  the step's weight matmuls alone, one row: {floor * 1000:.1f} ms a token, a bound of {1 / floor:.1f} tok/s "
          f"for any engine reading these fp32 weights; tailor chat spends {1000 / max(ours) - floor * 1000:.1f} ms a "
          f"token beyond them")


def weight_matmuls_s(model: CausalLM) -> float:
    """Seconds of one decode step's matmuls over every weight (the output layer included) at batch 1, and
    nothing else: on the CPU these read all the weights from memory, the floor of a decode step."""
    weights = [m.weight for m in model.modules() if isinstance(m, DenseLinear)]
    if model.lm_head is None:  # the output layer is the embedding table
        weights.append(model.embed)
    inputs = [torch.randn(1, w.shape[1], dtype=w.dtype) for w in weights]
    best = math.inf
    with torch.inference_mode():
        for _ in range(ROUNDS + 1):
            t = time.perf_counter()
            for w, x in zip(weights, inputs, strict=True):
                F.linear(x, w)
            best = min(best, time.perf_counter() - t)
    return best


def stream_rates(model: CausalLM, prompts: list[list[int]], n: int = DECODE_TOKENS) -> tuple[float, float]:
    """Aggregate decode tok/s after the first step (all prompts fit one prefill step): all streams, then one."""
    engine, _ = make_engine(model)
    _, _, one_s = timed_generate(engine, prompts[:1], n + 1)
    one = n / one_s
    engine, _ = make_engine(model)
    outs, _, rest = timed_generate(engine, prompts, n + 1)
    return (sum(len(o) for o in outs) - len(outs)) / rest, one


def bench_streams(model: CausalLM, prompts: list[list[int]]) -> None:
    """Decode throughput, 8 streams vs 1."""
    eight, one = stream_rates(model, prompts)
    print(f"aggregate decode tok/s: 8 streams {eight:.1f}, 1 stream {one:.1f}: {eight / one:.2f}x")


def bench_prefix(model: CausalLM, tok: HfTokenizer) -> None:
    engine, _ = make_engine(model)
    words = ("The committee reviewed the budget, the schedule and the risks of the bridge project. " * 80)
    shared = tok.encode(words)[:1024]
    tail_a, tail_b = tok.encode(" Summarize it."), tok.encode(" List the risks.")
    _, cold, _ = timed_generate(engine, [shared + tail_a], 1)
    _, warm, _ = timed_generate(engine, [shared + tail_b], 1)
    print(f"prefix cache: TTFT cold {cold * 1000:.0f} ms, sharing a 1,024-token prefix {warm * 1000:.0f} ms: "
          f"{100 * warm / cold:.1f}% of cold")


def bench_speculative(model: CausalLM, tok: HfTokenizer) -> None:
    prompt = chat_ids(tok, REWRITE)
    n = 96
    plain, _ = make_engine(model, 0, seqs=1)
    timed_generate(plain, [prompt], 2)
    base_out, _, base_s = timed_generate(plain, [prompt], n)
    spec_engine, spec = make_engine(model, 4, seqs=1)
    spec_out, _, spec_s = timed_generate(spec_engine, [prompt], n)
    same = "identical" if spec_out == base_out else "DIFFERENT"
    print(f"prompt-lookup speculative (k=4), rewrite task, {n} tokens: {(n - 1) / spec_s:.1f} vs {(n - 1) / base_s:.1f} "
          f"tok/s: {base_s / spec_s:.2f}x, acceptance {spec.acceptance_rate:.0%}, output {same}")


def bench_awq_on_the_cpu(directory: Path, tmp: Path) -> None:
    """The starter model quantized to AWQ (groups of 64): kept 4-bit in the int4 CPU kernel (what the engine
    does when fp32 would not fit in RAM) vs dequantized to fp32 at load (what it does otherwise)."""
    awq_dir = tmp / "awq"
    write_awq_copy(directory, awq_dir, 64)
    prompt = list(range(3, 35))
    long_prompt = list(range(3, 515))
    figures = {}
    for label, int4 in (("fp32", False), ("int4", True)):
        model = load_model(awq_dir, "cpu", awq_int4=int4).model
        engine, _ = make_engine(model, seqs=1)
        timed_generate(engine, [long_prompt], 1)
        # Another first token each time: nothing comes from the prefix cache.
        prefill = min(timed_generate(engine, [[600 + r] + long_prompt[1:]], 1)[1] for r in range(ROUNDS))
        figures[label] = (decode_tok_s(model, prompt, DECODE_TOKENS), prefill, model.weights_bytes())
    (d32, p32, b32), (d4, p4, b4) = figures["fp32"], figures["int4"]
    print(f"AWQ on the CPU, kept 4-bit vs dequantized to fp32: decode {d4:.1f} vs {d32:.1f} tok/s ({d4 / d32:.2f}x), "
          f"prefill of 512 tokens {p4 * 1000:.0f} vs {p32 * 1000:.0f} ms ({p4 / p32:.2f}x the time), "
          f"weights {b4 / 1e6:.0f} vs {b32 / 1e6:.0f} MB ({b4 / b32:.2f}x)")


GPU_DECODE_TOKENS = 128
# TinyLlama-1.1B's shape: 22 layers, GQA with 4 KV heads, untied 32k-token embeddings.
GPU_SHAPE = dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                 num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048,
                 initializer_range=0.02)
AWQ_GROUP_SIZE = 128


def bytes_read_per_token(model: CausalLM) -> int:
    """Weight bytes one decode step reads: all, but of the embedding table only one row (unless it is
    also the output layer, which reads it whole)."""
    total = model.weights_bytes()
    if model.lm_head is not None:
        total -= model.embed.numel() * model.embed.element_size()
    return total


def copy_bandwidth(device: torch.device, n_bytes: int = 1 << 30) -> float:
    """Bytes per second of a device-to-device copy (read + write), best of 5."""
    src = torch.empty(n_bytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    best = math.inf
    for i in range(6):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t = time.perf_counter()
        dst.copy_(src)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i:  # the first copy warms up
            best = min(best, time.perf_counter() - t)
    return 2 * n_bytes / best


def decode_tok_s(model: CausalLM, prompt: list[int], n: int, cuda_graphs: bool | None = None) -> float:
    """Greedy decode speed at batch 1, best of ROUNDS (after a warm-up that captures the CUDA graphs)."""
    engine, _ = make_engine(model, seqs=1, cuda_graphs=cuda_graphs)
    timed_generate(engine, [prompt], 4)
    best = math.inf
    for r in range(ROUNDS):
        best = min(best, timed_generate(engine, [prompt[:-1] + [prompt[-1] + r + 1]], n + 1)[2])
    return n / best


def gpu_models(tmp: Path, shape: dict) -> tuple[Path, Path]:
    """A dense folder and its AWQ copy: the user's (environment), or written here with random weights."""
    dense, awq = os.environ.get("TAILOR_BENCH_GPU_DENSE"), os.environ.get("TAILOR_BENCH_GPU_AWQ")
    if dense and awq:
        return Path(dense), Path(awq)
    dense_dir, awq_dir = tmp / "dense", tmp / "awq"
    write_tiny_model(dense_dir, "llama", tokenizer=False, **shape)
    write_awq_copy(dense_dir, awq_dir, AWQ_GROUP_SIZE)
    return dense_dir, awq_dir


GPU_PROMPT = list(range(3, 35))


def gpu_decode(device: torch.device, dense_dir: Path, awq_dir: Path, n: int = GPU_DECODE_TOKENS) -> dict[str, tuple[float, int]]:
    """{"AWQ int4" | "dense fp16": (decode tok/s at batch 1, weight bytes read per token)} on `device`."""
    results: dict[str, tuple[float, int]] = {}
    # AWQ in the engine's own dtype on the device (bf16 on CUDA, for the int4 kernel); dense in fp16.
    for label, directory, dtype in (("AWQ int4", awq_dir, None), ("dense fp16", dense_dir, torch.float16)):
        model = load_model(directory, device, dtype).model
        results[label] = (decode_tok_s(model, GPU_PROMPT, n), bytes_read_per_token(model))
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return results


def peak_bandwidth(device: torch.device, copy_bytes: int = 1 << 30) -> tuple[float, str]:
    """Bytes per second the decode is held against: TAILOR_BENCH_PEAK_GBS (a spec sheet's), or a measured copy."""
    spec = os.environ.get("TAILOR_BENCH_PEAK_GBS")
    return (float(spec) * 1e9, "spec-sheet") if spec else (copy_bandwidth(device, copy_bytes), "measured copy")


def bench_gpu(device: torch.device, shape: dict = GPU_SHAPE, n: int = GPU_DECODE_TOKENS) -> None:
    """AWQ int4 vs dense fp16 decode on `device`, each against the bandwidth limit."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else str(device)
    with tempfile.TemporaryDirectory() as tmp:
        results = gpu_decode(device, *gpu_models(Path(tmp), shape), n)
    peak, source = peak_bandwidth(device)
    for label, (tok_s, n_bytes) in results.items():
        used = n_bytes * tok_s
        print(f"{name}, {label}: decode {tok_s:.1f} tok/s (batch 1, greedy, {n} tokens); {n_bytes / 1e9:.3f} GB of "
              f"weights read per token -> {used / 1e9:.0f} GB/s = {used / peak:.0%} of the {peak / 1e9:.0f} GB/s "
              f"{source} bandwidth")
    (awq, awq_bytes), (dense, dense_bytes) = results["AWQ int4"], results["dense fp16"]
    print(f"AWQ int4 vs dense fp16: {awq / dense:.2f}x the decode speed with {awq_bytes / dense_bytes:.2f}x "
          f"the bytes per token (the bandwidth limit alone would give {dense_bytes / awq_bytes:.2f}x)")


def main() -> None:
    torch.set_num_threads(THREADS)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        convert(starter_model_path(), directory)
        model = load_model(directory).model
        tok = HfTokenizer(directory)
        prompts = [chat_ids(tok, f"Tell me a story about animal number {i} in the forest.") for i in range(8)]
        bench_decode_vs_transformers(directory, model, tok, Path(tempfile.mkdtemp(dir=tmp)))
        bench_streams(model, prompts)
        bench_prefix(model, tok)
        bench_speculative(model, tok)
        bench_awq_on_the_cpu(directory, Path(tempfile.mkdtemp(dir=tmp)))
    if torch.cuda.is_available():
        bench_gpu(torch.device("cuda"))
    else:
        print("GPU section skipped: no CUDA device here (AWQ decode vs the bandwidth limit and vs dense fp16)")


if __name__ == "__main__":
    main()
