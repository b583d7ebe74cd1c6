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
