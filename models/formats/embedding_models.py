"""Which GGUF files are embedding models, from their metadata: what the planner and the engine both ask.

An embedding model turns text into one vector and writes no replies. llama.cpp knows one by its
architecture (an encoder such as BERT: bidirectional attention, no KV cache, no output layer) or by the
`{arch}.pooling_type` its converter wrote (Qwen3-Embedding is the qwen3 architecture with "last" pooling).
The metadata may be the header's typed values (models.formats.gguf_header) or llama.cpp's own text.
"""

from __future__ import annotations

from collections.abc import Mapping

# llama.cpp's enum llama_pooling_type: how a sequence's hidden states become its one vector.
POOLING_NONE, POOLING_MEAN, POOLING_CLS, POOLING_LAST, POOLING_RANK = 0, 1, 2, 3, 4
POOLING_NAMES = {POOLING_NONE: "none", POOLING_MEAN: "mean", POOLING_CLS: "cls", POOLING_LAST: "last",
                 POOLING_RANK: "rank"}
# Inputs one batch of an embedding context holds at most (its n_seq_max): the engine makes it so
# (engine/gguf/llama_embed.py), and llama.cpp's output buffer holds a row of logits and a vector for each.
EMBED_BATCH_INPUTS = 64
# Architectures llama.cpp runs as encoders: every token sees the whole input, and it keeps no KV cache
# (its create_memory makes none for them) and computes no logits. Each is an embedding model.
ENCODER_ARCHITECTURES = frozenset({
    "bert", "eurobert", "gemma-embedding", "jina-bert-v2", "jina-bert-v3", "modern-bert", "neo-bert", "nomic-bert",
    "nomic-bert-moe",
})


def architecture_of(metadata: Mapping[str, object]) -> str:
    return str(metadata.get("general.architecture") or "")


def pooling_type(metadata: Mapping[str, object]) -> int | None:
    """`{arch}.pooling_type` as llama.cpp's number; None where the file names none (or not a number)."""
    value = metadata.get(f"{architecture_of(metadata)}.pooling_type")
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(str(value))
    except ValueError:
        return None


def is_encoder(metadata: Mapping[str, object]) -> bool:
    """An encoder-only model: no KV cache, no output layer, every input evaluated in one batch."""
    return architecture_of(metadata) in ENCODER_ARCHITECTURES


def is_embedding_model(metadata: Mapping[str, object]) -> bool:
    """A model that makes vectors only: an encoder architecture, or a pooling type set (rerankers' "rank" too:
    they write no replies either)."""
    return is_encoder(metadata) or pooling_type(metadata) not in (None, POOLING_NONE)
