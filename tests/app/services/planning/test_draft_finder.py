"""Speculative: Auto finds a draft model on disk: the smallest GGUF with the model's tokenizer and
at most a quarter of its weights; the plan says so and the load request carries it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.services.load_settings import LoadSettings
from app.services.planning.draft_finder import DraftFinder
from app.services.planning.load_planner import LoadPlanner
from models.hardware.profile import profile_for
from models.plan.load_options import SpeculativeOptions
from tests.fixtures.tiny_gguf import TinySpec, borrow_tokenizer, write_tiny_llama


@pytest.fixture(scope="module")
def library(starter_model: Path, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("library")
    tokenizer = borrow_tokenizer(starter_model)
    other = replace(tokenizer, tokens=["<other>", *tokenizer.tokens[1:]])
    return {
        "small": write_tiny_llama(folder / "small.gguf", TinySpec(n_layers=2, tied_output=True), tokenizer),
        "smaller": write_tiny_llama(folder / "smaller.gguf", TinySpec(n_layers=1, n_embd=64, n_heads=2, n_kv_heads=1,
                                                                       n_ff=128, tied_output=True), tokenizer),
        "too-big": write_tiny_llama(folder / "too-big.gguf", TinySpec(n_layers=2, n_embd=512, n_heads=8), tokenizer),
        "other-tokenizer": write_tiny_llama(folder / "other.gguf", TinySpec(n_layers=1, n_embd=64, n_heads=2,
                                                                            n_kv_heads=1, n_ff=128, tied_output=True),
                                     other),
    }


def test_the_smallest_file_with_the_same_tokenizer_is_found(starter_model, library):
    files = [*library.values(), starter_model]
    finder = DraftFinder(lambda: files)
    assert finder.find(str(starter_model)) == library["smaller"]
    files.remove(library["smaller"])
    assert finder.find(str(starter_model)) == library["small"]
    files.remove(library["small"])  # left: one too big, one of another tokenizer, the model itself
    assert finder.find(str(starter_model)) is None
    assert finder.find(str(library["other-tokenizer"])) is None  # nothing shares its tokenizer
    assert DraftFinder(lambda: [Path("/nowhere/x.gguf")]).find(str(starter_model)) is None


def test_auto_plans_with_the_draft_it_found_and_the_other_modes_do_not(starter_model, library, tmp_path):
    planner = LoadPlanner(profile_for(ram_gib=16), status_dir=tmp_path,
                          drafts=DraftFinder(lambda: [library["small"], starter_model]))
    auto = planner.plan_load(str(starter_model), LoadSettings(n_ctx=2048))
    assert auto.request.speculation.draft_path == str(library["small"])
    assert any("Auto drafts with small.gguf" in r for r in auto.plan.reasons)
    assert any(r.startswith("Draft model small.gguf") for r in auto.plan.reasons)
    lookup = planner.plan_load(str(starter_model), LoadSettings(n_ctx=2048, speculation=SpeculativeOptions("lookup")))
    assert lookup.request.speculation.draft_path is None
    chosen = planner.plan_load(str(starter_model), LoadSettings(
        n_ctx=2048, speculation=SpeculativeOptions("auto", str(library["smaller"]))))
    assert chosen.request.speculation.draft_path == str(library["smaller"])  # the user's choice stays


def test_the_library_offers_its_downloaded_and_imported_ggufs(starter_model, library, tmp_path):
    import hashlib

    from app.services.planning.draft_finder import library_ggufs
    from models.hub.cache import link_blob, write_ref
    from models.library import ModelStore

    cache = tmp_path / "hub"
    data = library["small"].read_bytes()
    repo = cache / "models--org--small-GGUF"
    blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
    blob.parent.mkdir(parents=True)
    blob.write_bytes(data)
    link_blob(blob, repo / "snapshots" / ("c" * 40) / "small.gguf")
    write_ref(repo, "main", "c" * 40)
    store = ModelStore(tmp_path / "data", cache)
    store.import_gguf(library["smaller"])
    files = library_ggufs(store)
    assert {p.name for p in files} == {"small.gguf", "smaller.gguf"}
    assert DraftFinder(lambda: [*library_ggufs(store), starter_model]).find(str(starter_model)).name == "smaller.gguf"


def test_tailor_serve_plans_with_a_draft_from_the_library(starter_model, library, tmp_path):
    from app.server.own_engine import OwnEngine

    engine = OwnEngine(tmp_path / "engine.log", drafts=DraftFinder(lambda: [library["small"], starter_model]))
    assert engine.plan(starter_model, LoadSettings(n_ctx=2048)).request.speculation.draft_path == str(library["small"])
    plain = OwnEngine(tmp_path / "engine.log")
    assert plain.plan(starter_model, LoadSettings(n_ctx=2048)).request.speculation.draft_path is None


def test_a_draft_padded_to_another_vocabulary_length_is_found_within_128_tokens(starter_model, tmp_path):
    """Qwen2.5's GGUFs pad the same tokens to 151,936 (0.5B) and 152,064 (7B): a pair the engine accepts."""
    from tests.fixtures.tiny_families import padded_tokenizer

    tokenizer = borrow_tokenizer(starter_model)
    small = TinySpec(n_layers=1, n_embd=64, n_heads=2, n_kv_heads=1, n_ff=128, tied_output=True)
    padded = write_tiny_llama(tmp_path / "padded.gguf", small, padded_tokenizer(tokenizer, len(tokenizer.tokens) + 128))
    too_far = write_tiny_llama(tmp_path / "too-far.gguf", small, padded_tokenizer(tokenizer, len(tokenizer.tokens) + 129))
    assert DraftFinder(lambda: [padded, starter_model]).find(str(starter_model)) == padded
    assert DraftFinder(lambda: [too_far, starter_model]).find(str(starter_model)) is None


def test_an_embedding_model_with_the_same_tokenizer_is_never_a_draft(starter_model, tiny_bert):
    # A Qwen3-Embedding beside a Qwen3 shares its tokenizer; llama.cpp aborts when an encoder drafts.
    assert DraftFinder(lambda: [tiny_bert, starter_model]).find(str(starter_model)) is None
