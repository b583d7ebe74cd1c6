"""Shared checks of the torch engine tests: our logits and greedy tokens against transformers'."""

from __future__ import annotations

from pathlib import Path

import torch

from engine.torch.arch import CausalLM, load_model
from engine.torch.attention import KVCache
from engine.torch.paged_sequence import PagedSequence


def kv_for(model: CausalLM, num_blocks: int = 16, block_size: int = 16) -> KVCache:
    c = model.config
    return KVCache(c.num_layers, num_blocks, block_size, c.num_kv_heads, c.head_dim, model.dtype, model.device)


def greedy_with_logits(model: CausalLM, prompt: list[int], steps: int) -> tuple[torch.Tensor, list[torch.Tensor], list[int]]:
    """Prompt logits [len, vocab], then `steps` greedy tokens with the logits each was chosen from.

    The blocks are handed out in reverse order so the test exercises the block table.
    """
    kv = kv_for(model)
    seq = PagedSequence(model, kv, list(reversed(range(kv.num_blocks))))
    prompt_logits = seq.forward(prompt)
    logits, tokens = [prompt_logits[-1]], []
    for _ in range(steps):
        tokens.append(int(logits[-1].argmax()))
        if len(tokens) < steps:
            logits.append(seq.forward([tokens[-1]])[0])
    return prompt_logits, logits, tokens


def hf_greedy_with_logits(hf_model, prompt: list[int], steps: int) -> tuple[torch.Tensor, list[torch.Tensor], list[int]]:
    ids = torch.tensor([prompt])
    hf_model.generation_config.eos_token_id = None  # run all steps; our side ignores eos too
    with torch.no_grad():
        prompt_logits = hf_model(ids).logits[0]
        out = hf_model.generate(
            ids,
            max_new_tokens=steps,
            do_sample=False,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=0,
        )
    tokens = out.sequences[0, len(prompt) :].tolist()
    return prompt_logits, [row[0].float() for row in out.logits], tokens


def compare_with_hf(directory: Path, hf_model, prompt: list[int], steps: int = 32) -> float:
    """Max |logit difference| over the prompt and every greedy step; asserts identical greedy tokens."""
    model = load_model(directory).model
    ours_prompt, ours, ours_tokens = greedy_with_logits(model, prompt, steps)
    ref_prompt, ref, ref_tokens = hf_greedy_with_logits(hf_model, prompt, steps)
    assert ours_tokens == ref_tokens
    diffs = [float((ours_prompt - ref_prompt).abs().max())]
    diffs += [float((a - b).abs().max()) for a, b in zip(ours, ref, strict=True)]
    return max(diffs)
