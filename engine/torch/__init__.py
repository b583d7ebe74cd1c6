"""The PyTorch engine: AWQ and dense safetensors models over a paged KV cache.

The core (config, sequence, block_manager, scheduler, llm_engine) is plain Python and imports no torch
(an import-linter contract in pyproject.toml keeps it so); the model runner, layers, loader and sampler
are the torch side. This package file imports nothing, so importing the core never pulls in torch.
"""
