"""Embedding models in the plan: no KV cache for an encoder, the whole context in one ubatch, the forecast
against what the engine's llama.cpp context really allocates, and a context no larger than an input can be."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner
from app.services.planning.plan_text import format_plan
from engine.gguf.backend import GgufBackend
from engine.gguf.log_bridge import LlamaLogBridge
from engine.protocol import LoadRequest
from models.formats.gguf_header import read_gguf_header
from models.hardware.profile import profile_for
from models.plan.candidates import Candidate
from models.plan.context import EMBEDDING_CONTEXT_CAP
from models.plan.decision_tree import make_plan
from models.plan.forecast import ForecastSettings, forecast, shape_from_gguf
from models.plan.machine import Machine
from models.plan.sources import gguf_file_candidate
from tests.fixtures.tiny_bert import BertSpec, write_tiny_bert
from tests.fixtures.tiny_gguf import borrow_tokenizer

CPU_ONLY = Machine.from_profile(profile_for(ram_gib=32))


@pytest.fixture(scope="module")
def wider_bert(starter_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bge-base's widths (768, 12 heads, FFN 3072) and trained length 2,048, in two layers."""
    spec = BertSpec(n_layers=2, n_embd=768, n_heads=12, n_ff=3072, n_ctx_train=2048, name="Wider BERT")
    return write_tiny_bert(tmp_path_factory.mktemp("bert") / "wider-bert.gguf", borrow_tokenizer(starter_model), spec)


def test_an_encoder_is_read_as_an_embedding_model_without_output_layer(tiny_bert: Path, starter_model: Path):
    shape = shape_from_gguf(read_gguf_header(tiny_bert))
    assert shape.embedding and shape.encoder and not shape.output_tied
    chat = shape_from_gguf(read_gguf_header(starter_model))
    assert not chat.embedding and not chat.encoder


@pytest.mark.parametrize(("n_ctx", "flash_attn"), [(256, True), (512, True), (512, False), (2048, True),
                                                   (2048, False)])
def test_the_forecast_meets_the_engines_own_buffers(wider_bert: Path, n_ctx: int, flash_attn: bool):
    backend = GgufBackend(LlamaLogBridge())
    try:
        backend.load(LoadRequest(str(wider_bert), n_ctx=n_ctx, flash_attn=flash_attn, prefix_cache_bytes=0))
        real = backend.memory_figures().buffers
    finally:
        backend.close()
    settings = ForecastSettings(n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx, flash_attn=flash_attn)
    predicted = forecast(shape_from_gguf(read_gguf_header(wider_bert)), settings)
    assert predicted.total("kv_cache_bytes") == real.total("kv") == 0
    compute, actual = predicted.total("compute_bytes"), real.total("compute")
    assert actual <= compute <= actual * 1.15, (compute, actual)  # a little over, never under
    weights = real.total("weights")
    assert abs(predicted.total("weights_bytes") - weights) <= 0.02 * weights


def test_auto_context_is_the_trained_length_in_one_ubatch(tiny_bert: Path):
    plan = make_plan(CPU_ONLY, [gguf_file_candidate(tiny_bert)], context=None)
    assert plan.context == 512 and plan.n_batch == plan.n_ubatch == 512 and plan.fits and plan.embedding
    assert plan.forecast.total("kv_cache_bytes") == 0
    assert any(r.startswith("An embedding model") and "no KV cache" in r for r in plan.reasons)
    text = format_plan(plan)
    assert "an embedding model: inputs of up to 512 tokens, up to 64 evaluated in one batch" in text
    assert "parallel replies" not in text


def test_a_context_asked_past_the_trained_length_is_the_trained_length(tiny_bert: Path):
    plan = make_plan(CPU_ONLY, [gguf_file_candidate(tiny_bert)], context=4096)
    assert plan.context == 512


def test_a_causal_embedding_model_keeps_a_kv_cache_of_one_batch_and_a_capped_context(starter_model: Path):
    chat = gguf_file_candidate(starter_model)  # Qwen3-Embedding's case: a decoder with a pooling type
    embedding = Candidate(chat.format, chat.files, chat.quant, chat.size_bytes,
                          replace(chat.shape, embedding=True, n_ctx_train=32768))
    plan = make_plan(CPU_ONLY, [embedding], context=None)
    assert plan.context == EMBEDDING_CONTEXT_CAP and plan.n_ubatch == EMBEDDING_CONTEXT_CAP
    assert plan.forecast.total("kv_cache_bytes") > 0
    # Its graph computes logits for every token of the batch: the compute buffer is sized for them.
    assert plan.forecast.total("compute_bytes") > chat.shape.n_vocab * EMBEDDING_CONTEXT_CAP * 4
    assert any("its KV cache holds one batch of inputs" in r for r in plan.reasons)


def test_the_load_planner_loads_an_embedding_model_for_embeddings(tiny_bert: Path, starter_model: Path):
    planner = LoadPlanner(profile_for(ram_gib=32))
    planned = planner.plan_load(str(tiny_bert), LoadSettings(n_ctx=None))
    assert planned.request.embeddings and planned.request.n_ctx == 512 and planned.refusal is None
    assert not planner.plan_load(str(starter_model), LoadSettings(n_ctx=2048)).request.embeddings
