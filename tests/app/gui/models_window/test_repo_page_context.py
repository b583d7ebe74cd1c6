"""The Models window's repo page plans at a context and KV type of its own controls (the chat's, when
the window opens), re-plans when they change without reading the hub again, and says the largest
context that fits. Real widgets, a fake hub serving a real tiny GGUF file."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.gui.models_window.manager_window import ModelManager
from models.library import ModelStore
from models.plan.machine import Machine
from models.units import GIB
from tests.app.conftest import QUICK, with_load
from tests.fixtures import fake_hub as hub_fixtures
from tests.fixtures.fake_hub import FakeHub
from tests.fixtures.tiny_gguf import TinySpec, borrow_tokenizer, write_tiny_llama

fake_hub = hub_fixtures.fake_hub
REPO = "org/Long-GGUF"
# Trained for 1M tokens, so memory, not the trained length, limits its context: on a CPU with
# 2.5 GiB of RAM (2 GiB of it kept for everything else) an f16 KV cache holds some 340,000 tokens
# (the forecast says exactly how many), a q8_0 one nearly twice as many, a q4_0 one all 1M.
LONG_SPEC = TinySpec(n_layers=2, n_embd=256, n_heads=4, n_kv_heads=2, n_ff=512, n_ctx_train=1 << 20)
SMALL_CPU = Machine(None, 0, 0, None, int(2.5 * GIB))
WAIT_MS = 30_000


@pytest.fixture(scope="module")
def long_model(starter_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("long") / "Long-F16.gguf"
    return write_tiny_llama(path, LONG_SPEC, borrow_tokenizer(starter_model))


@pytest.fixture
def page(qtbot, fake_hub: FakeHub, long_model: Path, tmp_path: Path):
    fake_hub.add_repo(REPO, {"Long-F16.gguf": long_model, "README.md": b"# Long\n"}, tags=["gguf"])
    manager = ModelManager(lambda path: None, store=ModelStore(tmp_path / "data"), machine_factory=lambda: SMALL_CPU)
    qtbot.addWidget(manager)
    manager.show()
    with qtbot.waitSignal(manager.repo_page.loaded, timeout=WAIT_MS):
        manager.open_repo(REPO)
    yield manager.repo_page
    manager.shutdown()


def verdict(page) -> str:
    return page.verdict_of(page.verdicts()[page.row_of("F16")])


def test_the_page_plans_at_auto_and_shows_the_largest_context_that_fits(page):
    assert page.context.context() is None and page.kv_type.currentText() == "f16"
    plan = page.assessment.recommended.plan
    assert (plan.context, plan.kv_type) == (32768, "f16")  # Auto: the largest that fits, at most the cap
    assert 300_000 < plan.max_context < 400_000
    assert verdict(page) == f"CPU · fits in RAM up to {plan.max_context:,} tokens"
    assert page.table.item(page.row_of("F16"), 4).text() == verdict(page)
    assert "Context Auto (up to 32,768 tokens): 32,768 tokens" in page.status.text()


def test_a_new_kv_type_or_context_plans_again_without_reading_the_hub(qtbot, page, fake_hub: FakeHub):
    before = len(fake_hub.requests)
    f16_most = page.assessment.recommended.plan.max_context
    with qtbot.waitSignal(page.loaded, timeout=WAIT_MS):
        page.kv_type.setCurrentText("q8_0")
    plan = page.assessment.recommended.plan
    assert plan.kv_type == "q8_0" and 1.8 * f16_most < plan.max_context < 2 * f16_most  # ~half the bytes a token
    q8_most = plan.max_context
    assert verdict(page) == f"CPU · fits in RAM up to {q8_most:,} tokens"
    assert "q8_0 KV cache" in page.status.text()
    with qtbot.waitSignal(page.loaded, timeout=WAIT_MS):
        page.context.set_context(8192)
    plan = page.assessment.recommended.plan
    assert (plan.context, plan.max_context) == (8192, q8_most)  # the most that fits does not move
    assert "8,192 tokens of context" in page.status.text()
    assert not page.auto_cap.isEnabled()  # the cap counts only for Auto
    assert len(fake_hub.requests) == before  # the files read at first were planned again


def test_the_page_follows_the_chat_when_the_window_opens(qtbot, page, make_window):
    window = make_window(start=False, settings=with_load(QUICK, n_ctx=None, auto_ctx_cap=65536, kv_type="q4_0"))
    manager = window.show_models()
    repo = manager.repo_page
    assert (repo.context.context(), repo.auto_cap.value(), repo.kv_type.currentText()) == (None, 65536, "q4_0")
    # The page of this test's own manager re-plans when it is told the chat's settings.
    with qtbot.waitSignal(page.loaded, timeout=WAIT_MS):
        page.set_plan_settings(None, 65536, "q4_0")
    plan = page.assessment.recommended.plan
    assert (plan.context, plan.kv_type, plan.max_context) == (65536, "q4_0", 1 << 20)
    assert verdict(page) == "CPU · fits in RAM up to 1,048,576 tokens"
