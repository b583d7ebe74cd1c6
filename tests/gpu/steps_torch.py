"""The PyTorch engine's GPU checks: its `pytest -m gpu` tests, AWQ int4 decode of a synthetic 1B-class Llama against
the bandwidth limit and against dense fp16 (tests/bench/torch_engine.py's GPU section), CUDA-graph decode on vs
off, 8 streams vs 1, and the GPU pool share (gpu_memory_fraction) honoured.

The targets of the speed ratios were set before any GPU run (none has run yet): they are first guesses, to
be revised with the first report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.gpu.context import CheckContext
from tests.gpu.report import Outcome, judged, plan_only
from tests.gpu.wheels import folder_bytes

# A dry run or a rehearsal writes the 1B-class models at this size (AWQ groups of 128 need widths of 128n).
SMALL_SHAPE = dict(vocab_size=320, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, max_position_embeddings=512, initializer_range=0.02)
SMALL_TOKENS = 8
# Spec-sheet memory bandwidth, GB/s, by the name torch gives the card (models/hardware/gpu_catalog.py has none).
SPEC_GBS = {"H200": 4800, "H100 80GB HBM3": 3350, "H100 SXM": 3350, "H100 NVL": 3900, "H100 PCIe": 2000,
            "A100-SXM4-80GB": 2039, "A100 80GB PCIe": 1935, "A100-SXM4-40GB": 1555, "A100-PCIE-40GB": 1555}
AWQ_OVER_DENSE = 1.0  # AWQ int4 decodes at least as fast as dense fp16
GRAPHS_OVER_EAGER = 1.2
STREAMS = 8
STREAMS_OVER_ONE = 4.0
FRACTIONS = (0.25, 0.5)
POOL_TOLERANCE = 0.03
# Tests that need the starter model (94 MiB, not carried): left out where it is not installed; the llama
# steps check the same on the starter's twin.
STARTER_TESTS = ("tests/engine/gguf/test_memory_report.py::test_offloaded_layers_are_reported_on_the_gpu",)
NOT_COLLECTED = ("app", "packaging", "gpu")  # Qt, the bundle, and this check itself
MANIFEST = "models.json"


# ---------------------------------------------------------------- pytest -m gpu


def gpu_test_files(repo: Path) -> list[str]:
    """Test files with a `@pytest.mark.gpu` test, outside the Qt and packaging tests (no PySide6 there)."""
    tests = repo / "tests"
    return [str(p.relative_to(repo)) for p in sorted(tests.rglob("test_*.py"))
            if p.relative_to(tests).parts[0] not in NOT_COLLECTED and "pytest.mark.gpu" in p.read_text()]


def pytest_command(ctx: CheckContext, collect_only: bool) -> tuple[list[str], list[str]]:
    """The pytest command line, and the tests it leaves out (those needing the missing starter model)."""
    from tests.gpu.steps_llama import starter_path

    left_out = list(STARTER_TESTS) if starter_path() is None else []
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-p", "no:cacheprovider", *gpu_test_files(Path(ctx.repo))]
    command += [f"--deselect={t}" for t in left_out]
    command += ["--collect-only", "-q"] if collect_only else ["-q", f"--junitxml={ctx.path('pytest-gpu.xml')}"]
    return command, left_out


def junit_counts(path: Path) -> dict[str, int]:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    return {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}


def pytest_gpu(ctx: CheckContext) -> Outcome:
    command, left_out = pytest_command(ctx, collect_only=False)
    done = subprocess.run(command, cwd=ctx.repo, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **ctx.llama_env})
    xml = ctx.path("pytest-gpu.xml")
    counts = junit_counts(xml) if xml.exists() else {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    ok = done.returncode == 0 and counts["tests"] > 0 and not (counts["failures"] or counts["errors"] or counts["skipped"])
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return judged(ok, f"{passed} of {counts['tests']} passed", passed, done.stdout[-1500:] + done.stderr[-500:],
                  counts=counts, left_out=left_out, returncode=done.returncode)


def pytest_plan(ctx: CheckContext) -> Outcome:
    """Collect the GPU tests here (their imports and markers): a dry run proves they are found."""
    command, left_out = pytest_command(ctx, collect_only=True)
    done = subprocess.run(command, cwd=ctx.repo, capture_output=True, text=True, timeout=300)
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    if done.returncode != 0 or not ids:
        return Outcome("fail", "collection failed", None, done.stdout[-1500:] + done.stderr[-500:])
    run_command, _ = pytest_command(ctx, collect_only=False)
    return plan_only(" ".join(["python", *run_command[1:]]), f"needs CUDA: {len(ids)} GPU tests collected here",
                     tests=ids, left_out=left_out)


# ---------------------------------------------------------------- the models


def build(ctx: CheckContext) -> Outcome:
    """The dense fp16 and AWQ (groups of 128) folders of a 1.1B Llama with random weights (TinyLlama's
    shape, tests/bench/torch_engine.py), with a tokenizer for the engine's own loader."""
    from transformers.utils import logging as hf_logging

    from tests.bench.torch_engine import GPU_SHAPE, gpu_models
    from tests.fixtures.tiny_hf import write_tokenizer

    hf_logging.disable_progress_bar()  # one bar per shard written, into the report's log
    shape = GPU_SHAPE if ctx.full else SMALL_SHAPE
    folder = ctx.path("torch")
    folder.mkdir(parents=True, exist_ok=True)
    dense, awq = gpu_models(folder, shape)
    write_tokenizer(awq)
    config = json.loads((awq / "config.json").read_text())
    ok = config.get("quantization_config", {}).get("quant_method") == "awq" and (dense / "model.safetensors").exists()
    (folder / MANIFEST).write_text(json.dumps({"dense": str(dense), "awq": str(awq), "shape": shape}))
    sizes = {"dense": folder_bytes(dense), "awq": folder_bytes(awq)}
    return judged(ok, f"dense {sizes['dense'] / 2**20:.1f} MiB, AWQ {sizes['awq'] / 2**20:.1f} MiB", None,
                  "" if ok else f"the AWQ folder's config says {config.get('quantization_config')}", shape=shape, bytes=sizes)


def _folders(ctx: CheckContext) -> dict:
    return json.loads(ctx.path("torch", MANIFEST).read_text())


def _tokens(ctx: CheckContext) -> int:
    from tests.bench.torch_engine import GPU_DECODE_TOKENS

    return GPU_DECODE_TOKENS if ctx.full else SMALL_TOKENS


def _awq_model(ctx: CheckContext):
    import torch

    from engine.torch.arch import load_model

    return load_model(Path(_folders(ctx)["awq"]), torch.device(ctx.device)).model


# ---------------------------------------------------------------- AWQ int4 vs the bandwidth limit and dense fp16


def spec_bandwidth(name: str) -> float | None:
    """The spec sheet's GB/s for a card torch names `name` ("NVIDIA H200"), where SPEC_GBS has it."""
    for key, gbs in sorted(SPEC_GBS.items(), key=lambda kv: -len(kv[0])):
        if key.lower() in name.lower():
            return gbs
    return None


def awq(ctx: CheckContext) -> Outcome:
    import torch

    from tests.bench.torch_engine import copy_bandwidth, gpu_decode, peak_bandwidth

    device = torch.device(ctx.device)
    folders = _folders(ctx)
    results = gpu_decode(device, Path(folders["dense"]), Path(folders["awq"]), _tokens(ctx))
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    copy_bytes = 1 << 30 if device.type == "cuda" else 1 << 26
    spec = spec_bandwidth(name)
    if spec is not None:
        os.environ.setdefault("TAILOR_BENCH_PEAK_GBS", str(spec))
    peak, source = peak_bandwidth(device, copy_bytes)
    rows = {}
    for label, (tok_s, n_bytes) in results.items():
        rows[label] = {"tok_s": tok_s, "bytes_per_token": n_bytes, "gb_s": n_bytes * tok_s / 1e9,
                       "share_of_peak": n_bytes * tok_s / peak}
    (a, _), (d, _) = results["AWQ int4"], results["dense fp16"]
    ratio = a / d
    figure = (f"AWQ {a:.0f} tok/s ({rows['AWQ int4']['share_of_peak']:.0%} of peak), dense {d:.0f} "
              f"({rows['dense fp16']['share_of_peak']:.0%}): {ratio:.2f}x")
    return judged(ratio >= AWQ_OVER_DENSE, figure, ratio, f"{name}: peak {peak / 1e9:.0f} GB/s ({source})",
                  rows=rows, device=name, peak_gb_s=peak / 1e9, peak_source=source,
                  copy_gb_s=copy_bandwidth(device, copy_bytes) / 1e9, shape=folders["shape"])


def awq_plan(ctx: CheckContext) -> Outcome:
    return plan_only(
        f"tests.bench.torch_engine.gpu_decode on cuda: the AWQ int4 and the dense fp16 folder, greedy, batch 1, "
        f"128 tokens, best of 3; bytes read per token x tok/s against the card's spec bandwidth ({SPEC_GBS['H200']} "
        f"GB/s for an H200) and a measured device copy; AWQ / dense >= {AWQ_OVER_DENSE}")


# ---------------------------------------------------------------- CUDA graphs, streams


def graphs(ctx: CheckContext) -> Outcome:
    from tests.bench.torch_engine import GPU_PROMPT, decode_tok_s

    model = _awq_model(ctx)
    n = _tokens(ctx)
    on = decode_tok_s(model, GPU_PROMPT, n, cuda_graphs=ctx.on_gpu)  # the CPU has no graphs: both eager there
    off = decode_tok_s(model, GPU_PROMPT, n, cuda_graphs=False)
    ratio = on / off
    return judged(ratio >= GRAPHS_OVER_EAGER, f"{on:.0f} vs {off:.0f} tok/s: {ratio:.2f}x", ratio,
                  "" if ctx.on_gpu else "rehearsal on the CPU: both sides run eagerly", graphs_tok_s=on, eager_tok_s=off)


def graphs_plan(ctx: CheckContext) -> Outcome:
    return plan_only("decode_tok_s of the AWQ model at batch 1 with ModelRunner(cuda_graphs=True) and with "
                     f"cuda_graphs=False; on / off >= {GRAPHS_OVER_EAGER}")


def streams(ctx: CheckContext) -> Outcome:
    from tests.bench.torch_engine import stream_rates

    model = _awq_model(ctx)
    prompts = [list(range(3 + i, 35 + i)) for i in range(STREAMS)]
    many, one = stream_rates(model, prompts, _tokens(ctx))
    ratio = many / one
    return judged(ratio >= STREAMS_OVER_ONE, f"{many:.0f} vs {one:.0f} tok/s: {ratio:.2f}x", ratio,
                  many_tok_s=many, one_tok_s=one)


def streams_plan(ctx: CheckContext) -> Outcome:
    return plan_only(f"tests.bench.torch_engine.stream_rates of the AWQ model: aggregate decode tok/s of {STREAMS} "
                     f"concurrent streams over 1; >= {STREAMS_OVER_ONE}x")


# ---------------------------------------------------------------- the GPU pool share


def pool(ctx: CheckContext) -> Outcome:
    """For each share f: the KV pool the engine makes is f of the memory free after the weights, less its
    activation reserve (engine/torch/kv_pool.py), and after a reply at least (1 - f) of it is still free."""
    import torch

    from engine.protocol import ChatMessage, GenerateRequest, LoadRequest, SamplingParams
    from engine.torch.backend import TorchBackend
    from engine.torch.kv_pool import MAX_BATCHED_TOKENS
    from models.plan.load_options import TorchOptions

    folder = _folders(ctx)["awq"]
    rows, problems = [], []
    for f in FRACTIONS:
        torch.cuda.empty_cache()
        free_before = torch.cuda.mem_get_info()[0]
        backend = TorchBackend(device="cuda")
        backend.load(LoadRequest(folder, n_ctx=2048, torch=TorchOptions(gpu_memory_fraction=f)))
        d = backend.details()
        c = backend.session.model.config
        reserve = MAX_BATCHED_TOKENS * (c.hidden_size * 8 + c.intermediate_size * 3 + c.vocab_size) * 4
        free_after_weights = free_before - d.weights_bytes
        expected = f * free_after_weights - reserve
        pool_bytes = d.kv_blocks_total * d.kv_bytes_per_block
        request = GenerateRequest(1, (ChatMessage("user", "Hello"),), SamplingParams(temperature=0.0, max_tokens=8))
        backend.generate(request, lambda _text: None, lambda: False)
        free_after = torch.cuda.mem_get_info()[0]
        backend.close()
        share, left = pool_bytes / expected, free_after / free_after_weights
        rows.append({"fraction": f, "pool_bytes": pool_bytes, "expected_bytes": int(expected), "pool_share": share,
                     "free_after_weights": free_after_weights, "free_after_reply": free_after, "left_share": left})
        if abs(share - 1) > POOL_TOLERANCE:
            problems.append(f"f={f}: the pool is {share:.3f} of f x the free memory")
        if left < (1 - f) * (1 - POOL_TOLERANCE):
            problems.append(f"f={f}: only {left:.1%} of the memory free after the weights is left, not {1 - f:.0%}")
    figure = ", ".join(f"f={r['fraction']}: pool {r['pool_share']:.3f}, left {r['left_share']:.0%}" for r in rows)
    return judged(not problems, figure, None, "\n".join(problems), rows=rows)


def pool_plan(ctx: CheckContext) -> Outcome:
    return plan_only(
        f"TorchBackend(device='cuda') loads the AWQ folder with gpu_memory_fraction {FRACTIONS}: each KV pool within "
        f"{POOL_TOLERANCE:.0%} of f x (free memory after the weights) - the activation reserve, and after an 8-token "
        "reply at least 1 - f of that memory still free", message="needs CUDA (torch.cuda.mem_get_info)")
