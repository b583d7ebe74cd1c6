"""Our Llama / Qwen2 against Hugging Face transformers on the same fp32 weights.

Tiny random configs written by the tests, and the built-in starter model (SmolLM2-135M, a
Llama) dequantized from its GGUF into a dense HF checkpoint: max logit difference <= 1e-3 over
a 64-token prompt and 32 greedy steps, identical greedy tokens.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine.torch.arch import load_model
from engine.torch.config import EngineConfig
from engine.torch.llm_engine import LLMEngine
from engine.torch.model_runner import ModelRunner
from engine.torch.sequence import SamplingOptions
from tests.engine.torch.reference import compare_with_hf, kv_for
from tests.fixtures.tiny_hf import write_tiny_model

TOLERANCE = 1e-3

CASES = {
    "llama": ("llama", {}),
    "llama3-rope": (
        "llama",
        {
            "rope_parameters": {
                "rope_type": "llama3",
                "rope_theta": 500000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            }
        },
    ),
    "llama-mha-untied": ("llama", {"num_key_value_heads": 4}),
    "qwen2-tied": ("qwen2", {}),
    "qwen2-untied": ("qwen2", {"tie_word_embeddings": False, "num_key_value_heads": 1}),
    "qwen3-qk-norm": ("qwen3", {"head_dim": 48}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_tiny_model_matches_transformers(case: str, tmp_path: Path) -> None:
    family, overrides = CASES[case]
    hf = write_tiny_model(tmp_path, family, tokenizer=False, **overrides)
    prompt = torch.randint(3, hf.config.vocab_size, (64,), generator=torch.Generator().manual_seed(1)).tolist()
    assert compare_with_hf(tmp_path, hf, prompt, steps=32) <= TOLERANCE


def test_continuous_batching_matches_transformers_and_sequential(tmp_path: Path) -> None:
    """8 requests at once (chunked prefill, mixed decode) = 8 one by one = transformers' greedy."""
    hf = write_tiny_model(tmp_path, "qwen2", tokenizer=False)
    model = load_model(tmp_path).model
    config = EngineConfig(num_kv_blocks=96, block_size=16, max_num_seqs=8, max_num_batched_tokens=48, max_model_len=256)
    engine = LLMEngine(config, ModelRunner(model, kv_for(model, 96), config))
    g = torch.Generator().manual_seed(2)
    prompts = [torch.randint(3, 320, (n,), generator=g).tolist() for n in (5, 40, 64, 100, 1, 17, 70, 33)]
    options = SamplingOptions(max_tokens=24, ignore_eos=True)
    together = engine.generate(prompts, options)
    one_by_one = [engine.generate([p], options)[0] for p in prompts]
    assert together == one_by_one
    hf.generation_config.eos_token_id = None
    with torch.no_grad():
        for prompt, tokens in zip(prompts, together, strict=True):
            ref = hf.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False, pad_token_id=0)
            assert ref[0, len(prompt) :].tolist() == tokens


def test_starter_model_dequantized_matches_transformers(starter_model: Path, tmp_path: Path) -> None:
    """SmolLM2-135M (the built-in GGUF), dequantized to a dense fp32 HF checkpoint, on a real chat prompt."""
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM

    from tests.fixtures.gguf_to_hf import convert

    convert(starter_model, tmp_path)
    hf = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    text = (
        "<|im_start|>system\nYou are a helpful assistant who answers briefly.<|im_end|>\n<|im_start|>user\n"
        "Write a short story about a fox and a dog who become friends in the forest, and explain why "
        "friendship matters to both of them in two sentences. Keep the words simple for a child of six."
        "<|im_end|>\n<|im_start|>assistant\n"
    )
    prompt = Tokenizer.from_file(str(tmp_path / "tokenizer.json")).encode(text).ids[-64:]
    assert compare_with_hf(tmp_path, hf, prompt, steps=32) <= TOLERANCE


def _engine(model, blocks: int, **kw) -> LLMEngine:
    config = EngineConfig(num_kv_blocks=blocks, block_size=16, max_num_seqs=8, max_num_batched_tokens=64,
                          max_model_len=256, **kw)
    return LLMEngine(config, ModelRunner(model, kv_for(model, blocks), config))


def test_running_out_of_kv_blocks_preempts_and_outputs_stay_the_same(tmp_path: Path) -> None:
    write_tiny_model(tmp_path, "llama", tokenizer=False)
    model = load_model(tmp_path).model
    g = torch.Generator().manual_seed(5)
    prompts = [torch.randint(3, 320, (n,), generator=g).tolist() for n in (30, 45, 20, 60, 33, 50, 25, 40)]
    options = SamplingOptions(max_tokens=40, ignore_eos=True)
    roomy = _engine(model, 96).generate(prompts, options)
    tight = _engine(model, 14)  # 224 positions for 8 sequences of up to 100 tokens
    assert tight.generate(prompts, options) == roomy
    assert tight.scheduler.num_preemptions > 0


def test_a_prompt_longer_than_the_context_fails_alone(tmp_path: Path) -> None:
    write_tiny_model(tmp_path, "llama", tokenizer=False)
    model = load_model(tmp_path).model
    engine = _engine(model, 64)
    options = SamplingOptions(max_tokens=8, ignore_eos=True)
    ok = [engine.add_request(list(range(3, 40)), options), engine.add_request(list(range(5, 20)), options)]
    too_long = engine.add_request([7] * 300, options)
    ends = {}
    while engine.has_unfinished():
        for out in engine.step():
            if out.finished:
                ends[out.seq_id] = out
    assert ends[too_long].finish_reason == "error" and "context holds 256" in ends[too_long].error
    assert all(ends[i].finish_reason == "length" for i in ok)
    assert all(len(engine.get_sequence(i).completion_token_ids) == 8 for i in ok if engine.get_sequence(i))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_graph_decode_matches_eager_decode(tmp_path: Path) -> None:
    write_tiny_model(tmp_path, "qwen2", tokenizer=False)
    model = load_model(tmp_path, "cuda", torch.float32).model
    config = EngineConfig(num_kv_blocks=64, block_size=16, max_num_seqs=8, max_num_batched_tokens=64, max_model_len=256)
    prompts = [list(range(3, 3 + n)) for n in (5, 17, 40, 9, 30)]
    options = SamplingOptions(max_tokens=16, ignore_eos=True)
    outputs = []
    for graphs in (False, True):
        runner = ModelRunner(model, kv_for(model, 64), config, cuda_graphs=graphs)
        outputs.append(LLMEngine(config, runner).generate(prompts, options))
    assert outputs[0] == outputs[1]


def test_decode_graph_buffers_give_eager_results_without_a_gpu(tmp_path: Path) -> None:
    """The static buffers of CUDA graph decode (padding rows, scratch slot, width buckets), run eagerly."""
    from engine.torch.model_runner import DecodeGraphs

    write_tiny_model(tmp_path, "llama", tokenizer=False)
    model = load_model(tmp_path).model
    config = EngineConfig(num_kv_blocks=64, block_size=16, max_num_seqs=8, max_num_batched_tokens=64, max_model_len=256)
    prompts = [list(range(3, 3 + n)) for n in (5, 17, 40, 9, 30, 140)]  # 3 and 6 rows pad to 4 and 8
    options = SamplingOptions(max_tokens=20, ignore_eos=True)
    eager = LLMEngine(config, ModelRunner(model, kv_for(model, 64), config)).generate(prompts, options)
    runner = ModelRunner(model, kv_for(model, 64), config)
    runner._graphs = DecodeGraphs(runner, 8, capture=False)
    engine = LLMEngine(config, runner)
    assert engine.generate(prompts, options) == eager
    assert engine.generate(prompts[:1], options) == eager[:1]
    # Rows pad to 1, 2, 4, 8; 140 + 20 tokens need 10 blocks (width 16); one short sequence: 1 row, width 8.
    keys = set(runner._graphs.steps)
    assert (8, 16) in keys and (1, 8) in keys
    assert all(b in (1, 2, 4, 8) and w in (8, 16) for b, w in keys)
