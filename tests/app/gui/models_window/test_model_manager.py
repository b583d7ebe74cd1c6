"""The Models window: search, repo page with verdicts, downloads with progress, the library; real widgets, fake hub."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.gui.models_window import library_page
from app.gui.models_window.download_bridge import DownloadBridge
from app.gui.models_window.downloads_panel import DownloadRow
from app.gui.models_window.manager_window import TAB_DOWNLOADS, TAB_REPO, ModelManager
from app.gui.models_window.repo_page import COL_STAR, COL_VERDICT, STAR
from models.download.handle import Download
from models.download.request import DownloadFile, DownloadRequest, StateChanged
from models.library import LocalFile, LocalRepo, ModelStore
from models.plan.machine import Machine
from models.units import GIB
from tests.fixtures import fake_hub as hub_fixtures
from tests.fixtures import hub_repos
from tests.fixtures.fake_hub import FakeHub

fake_hub = hub_fixtures.fake_hub
tiny_quants = hub_repos.tiny_quants
REPO = "org/Tiny-GGUF"
CPU_ONLY = Machine(None, 0, 0, None, 16 * GIB)
BIG_GPU = Machine("RTX 4090", 24 * GIB, 24 * GIB, (8, 9), 64 * GIB)
WAIT_MS = 30_000


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def hub(fake_hub: FakeHub, tiny_quants: dict[str, Path]) -> FakeHub:
    fake_hub.add_repo(REPO, hub_repos.gguf_repo_files(tiny_quants), tags=["gguf"], downloads=1234)
    fake_hub.add_repo("org/Other-AWQ", hub_repos.awq_repo_files(), tags=["awq"])
    return fake_hub


@pytest.fixture
def make_manager(qtbot, tmp_path: Path):
    managers: list[ModelManager] = []

    def make(machine: Machine = CPU_ONLY, loaded: list[str] | None = None) -> ModelManager:
        sink = loaded if loaded is not None else []
        manager = ModelManager(sink.append, store=ModelStore(tmp_path / "data"), machine_factory=lambda: machine)
        qtbot.addWidget(manager)
        managers.append(manager)
        manager.show()
        return manager

    yield make
    for manager in managers:
        manager.shutdown()


def open_repo(qtbot, manager: ModelManager, repo: str = REPO) -> None:
    with qtbot.waitSignal(manager.repo_page.loaded, timeout=WAIT_MS):
        manager.open_repo(repo)
    assert manager.tabs.currentIndex() == TAB_REPO


STALL_AFTER = 256 * 1024


def partial_size() -> int:
    """Bytes in the download's partial file (0 before it exists)."""
    partials = list(Path(os.environ["HF_HOME"]).rglob("*.incomplete"))
    return partials[0].stat().st_size if partials else 0


def wait_for_the_stall(qtbot, stall) -> None:  # noqa: ANN001 - a fake_hub.Faults
    """Until the hub stalls and the client holds every byte sent before it (mid-download, for sure)."""
    qtbot.waitUntil(lambda: stall.stalled.is_set() and partial_size() == STALL_AFTER, timeout=WAIT_MS)


def f16_ranges(hub: FakeHub, since: int) -> list[str | None]:
    """The Range headers of the F16 file's downloads from the CDN, after the first `since` requests."""
    return [r for m, p, r in hub.requests[since:] if m == "GET" and p.startswith("/cdn/") and p.endswith("F16.gguf")]


def download(qtbot, manager: ModelManager, quant: str, until: tuple[str, ...] = ("running",)):
    """Press Download on the group of `quant`; the download's row once it reaches one of `until`."""
    page = manager.repo_page
    with qtbot.waitSignal(manager.bridge.started, timeout=WAIT_MS) as started:
        qtbot.mouseClick(page.download_button(page.row_of(quant)), Qt.MouseButton.LeftButton)
    assert manager.tabs.currentIndex() == TAB_DOWNLOADS
    row = manager.downloads.row(started.args[0].id)
    qtbot.waitUntil(lambda: row.state in until, timeout=WAIT_MS)
    return row


def test_search_shows_the_repo_with_its_downloads(qtbot, hub: FakeHub, make_manager):
    manager = make_manager()
    page = manager.search_page
    qtbot.keyClicks(page.query, "tiny")
    with qtbot.waitSignal(page.searched, timeout=WAIT_MS):
        qtbot.keyClick(page.query, Qt.Key.Key_Return)
    assert page.repo_ids() == [REPO]
    assert "1,234 downloads" in page.results.item(0).text() and "updated" in page.results.item(0).text()
    page.filter.setCurrentIndex(page.filter.findText("AWQ"))
    page.query.clear()
    with qtbot.waitSignal(page.searched, timeout=WAIT_MS):
        page.search()
    assert page.repo_ids() == ["org/Other-AWQ"]
    with qtbot.waitSignal(manager.repo_page.loaded, timeout=WAIT_MS):
        page.results.itemActivated.emit(page.results.item(0))
    assert manager.repo_page.repo_id == "org/Other-AWQ"


def test_repo_page_gives_each_group_a_verdict_and_stars_the_cpu_pick(qtbot, hub: FakeHub, make_manager):
    manager = make_manager(CPU_ONLY)
    open_repo(qtbot, manager)
    page = manager.repo_page
    by_quant = {g.group.quant: g for g in page.verdicts() if g.group.format == "gguf"}
    assert set(by_quant) == {"F16", "Q8_0", "Q4_K_M"}
    assert [q for q, g in by_quant.items() if g.recommended] == ["Q4_K_M"]
    assert all(g.verdict == "CPU · fits in RAM" for g in by_quant.values())
    row = page.row_of("Q4_K_M")
    assert page.table.item(row, COL_STAR).text() == STAR
    assert page.table.item(page.row_of("F16"), COL_STAR).text() == ""
    assert page.table.item(row, COL_VERDICT).text() == "CPU · fits in RAM up to 4,096 tokens"  # its trained length
    assert "Q4_K_M" in page.status.text() and STAR in page.status.text()
    projector = next(g for g in page.verdicts() if g.group.format == "mmproj")
    assert "projector" in projector.verdict
    qtbot.mouseClick(page.why_button(row), Qt.MouseButton.LeftButton)
    dialog = page.plan_dialog
    qtbot.waitUntil(lambda: dialog.isVisible(), timeout=WAIT_MS)
    assert "Tiny-Llama-Q4_K_M.gguf" in dialog.windowTitle()
    assert "No NVIDIA GPU" in dialog.plain_text() and "Q4_K_M is the usual best" in dialog.plain_text()
    dialog.close()
    assert "Q4_K_M is the usual best" in page.table.item(row, COL_VERDICT).toolTip()


def test_on_a_big_gpu_the_best_quality_fits_fully(qtbot, hub: FakeHub, make_manager):
    manager = make_manager(BIG_GPU)
    open_repo(qtbot, manager)
    page = manager.repo_page
    assert page.assessment.recommended.group.quant == "F16"
    assert page.table.item(page.row_of("Q8_0"), COL_VERDICT).text() == "fits fully on GPU up to 4,096 tokens"


def test_a_repo_that_is_not_there_says_so_on_the_page(qtbot, hub: FakeHub, make_manager):
    manager = make_manager()
    open_repo(qtbot, manager, "org/Nope")
    assert "org/Nope" in manager.repo_page.status.text() and "no such repo" in manager.repo_page.status.text()
    assert manager.repo_page.table.rowCount() == 0


def test_downloading_a_group_shows_progress_and_ends_done_in_the_hf_cache(
        qtbot, hub: FakeHub, make_manager, tiny_quants: dict[str, Path]):
    manager = make_manager()
    open_repo(qtbot, manager)
    progress = []
    manager.bridge.progress.connect(progress.append)
    row = download(qtbot, manager, "Q4_K_M", until=("done", "failed"))
    assert row.state == "done", row.status.text()
    # The repo is a vision model's: its projector comes with the model file (pull_plan.projector_for).
    model = [p for p in progress if p.path_in_repo == "Tiny-Llama-Q4_K_M.gguf"]
    projector = [p for p in progress if p.path_in_repo == "mmproj-Tiny-Llama-F16.gguf"]
    assert model[-1].file_done == model[-1].file_total == tiny_quants["Q4_K_M"].stat().st_size
    assert progress[-1].done == progress[-1].total == model[-1].file_total + projector[-1].file_total
    assert row.bar.value() == row.bar.maximum()
    assert row.status.text().startswith("done")
    files = list((Path(os.environ["HF_HOME"]) / "hub").rglob("Tiny-Llama-Q4_K_M.gguf"))
    assert len(files) == 1 and sha256(files[0]) == sha256(tiny_quants["Q4_K_M"])
    assert len(list((Path(os.environ["HF_HOME"]) / "hub").rglob("mmproj-Tiny-Llama-F16.gguf"))) == 1
    assert not row.pause_button.isEnabled() and not row.cancel_button.isEnabled()


def test_corrupted_bytes_show_the_checksum_failure(qtbot, hub: FakeHub, make_manager):
    hub.fault(REPO, "Tiny-Llama-Q8_0.gguf", corrupt=True)
    manager = make_manager()
    open_repo(qtbot, manager)
    row = download(qtbot, manager, "Q8_0", until=("done", "failed"))
    assert row.state == "failed"
    text = row.status.text()
    assert "checksum mismatch" in text and "Tiny-Llama-Q8_0.gguf" in text and "removed" in text
    assert row.status.property("tone") == "error"  # in the theme's error colour (app.gui.common.theme)
    assert row.resume_button.isEnabled()
    assert not list(Path(os.environ["HF_HOME"]).rglob("Tiny-Llama-Q8_0.gguf"))


def test_pause_and_resume_finish_the_download(qtbot, hub: FakeHub, make_manager, tiny_quants: dict[str, Path]):
    stall = hub.fault(REPO, "Tiny-Llama-F16.gguf", stall_s=120, stall_after=STALL_AFTER, times=1)
    manager = make_manager()
    open_repo(qtbot, manager)
    started = len(hub.requests)  # the repo page's header reads come before
    row = download(qtbot, manager, "F16", until=("running",))
    wait_for_the_stall(qtbot, stall)
    qtbot.mouseClick(row.pause_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: row.state == "paused", timeout=WAIT_MS)
    assert row.status.text().startswith("paused") and row.resume_button.isEnabled()
    assert not row.pause_button.isEnabled()
    assert partial_size() == STALL_AFTER  # kept
    qtbot.mouseClick(row.resume_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: row.state in ("done", "failed"), timeout=WAIT_MS)
    assert row.state == "done", row.status.text()
    # Resumed from the partial file, not fetched again from byte 0.
    assert f16_ranges(hub, started) == [None, f"bytes={STALL_AFTER}-"]
    local = next(Path(os.environ["HF_HOME"]).rglob("Tiny-Llama-F16.gguf"))
    assert sha256(local) == sha256(tiny_quants["F16"])


def test_cancel_stops_the_download_and_keeps_nothing(qtbot, hub: FakeHub, make_manager):
    stall = hub.fault(REPO, "Tiny-Llama-F16.gguf", stall_s=120, stall_after=STALL_AFTER, times=1)
    manager = make_manager()
    open_repo(qtbot, manager)
    row = download(qtbot, manager, "F16", until=("running",))
    wait_for_the_stall(qtbot, stall)
    qtbot.mouseClick(row.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: row.state == "cancelled", timeout=WAIT_MS)
    assert not list(Path(os.environ["HF_HOME"]).rglob("*.incomplete"))
    assert not row.resume_button.isEnabled()


def test_closing_the_window_keeps_the_download_going(qtbot, hub: FakeHub, make_manager,
                                                    tiny_quants: dict[str, Path]):
    stall = hub.fault(REPO, "Tiny-Llama-F16.gguf", stall_s=120, stall_after=STALL_AFTER, times=1)
    manager = make_manager()
    open_repo(qtbot, manager)
    started = len(hub.requests)
    row = download(qtbot, manager, "F16", until=("running",))
    wait_for_the_stall(qtbot, stall)  # mid-download for sure
    manager.close()  # the window's close button
    assert not manager.isVisible() and row.state == "running"
    stall.release.set()  # the hub sends the rest while the window is closed
    qtbot.waitUntil(lambda: row.state in ("done", "failed"), timeout=WAIT_MS)
    assert row.state == "done", row.status.text()
    assert f16_ranges(hub, started) == [None]  # the same answer carried on: never paused and resumed
    local = next(Path(os.environ["HF_HOME"]).rglob("Tiny-Llama-F16.gguf"))
    assert sha256(local) == sha256(tiny_quants["F16"])
    manager.show()  # opened again: the same window, the finished download in its list
    assert manager.downloads.row(row.download_id) is row


def test_offline_search_says_so_at_once(qtbot, hub: FakeHub, make_manager, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    manager = make_manager()
    page = manager.search_page
    page.query.setText("tiny")
    with qtbot.waitSignal(page.searched, timeout=5000):
        page.search()
    assert "offline" in page.status.text() and "local models" in page.status.text()
    assert page.results.count() == 0


def test_an_unreachable_hub_is_a_message_not_a_hang(qtbot, hub: FakeHub, make_manager,
                                                    monkeypatch: pytest.MonkeyPatch):
    hub.stop()
    manager = make_manager()
    page = manager.search_page
    with qtbot.waitSignal(page.searched, timeout=15_000):
        page.search()
    assert "cannot reach the hub" in page.status.text()


def test_library_lists_the_download_and_deletes_it_after_asking(qtbot, hub: FakeHub, make_manager,
                                                               monkeypatch: pytest.MonkeyPatch):
    loaded: list[str] = []
    manager = make_manager(loaded=loaded)
    open_repo(qtbot, manager)
    assert download(qtbot, manager, "Q4_K_M", until=("done", "failed")).state == "done"
    library = manager.library
    qtbot.waitUntil(lambda: any(isinstance(i, LocalRepo) for i in library.items()), timeout=WAIT_MS)
    gguf = next(i for i in library.items() if isinstance(i, LocalFile))
    assert gguf.path_in_repo == "Tiny-Llama-Q4_K_M.gguf" and gguf.repo_id == REPO
    library.select(gguf)
    qtbot.mouseClick(library.load_button, Qt.MouseButton.LeftButton)
    assert loaded == [str(gguf.path)]
    opened = []
    monkeypatch.setattr(library_page, "open_folder", opened.append)
    qtbot.mouseClick(library.folder_button, Qt.MouseButton.LeftButton)
    assert opened == [gguf.path.parent]

    repo = next(i for i in library.items() if isinstance(i, LocalRepo))
    library.select(repo)
    asked = []
    monkeypatch.setattr(library_page, "confirm_delete", lambda parent, what: asked.append(what) or False)
    qtbot.mouseClick(library.delete_button, Qt.MouseButton.LeftButton)
    assert REPO in asked[0] and gguf.path.exists()
    monkeypatch.setattr(library_page, "confirm_delete", lambda parent, what: True)
    qtbot.mouseClick(library.delete_button, Qt.MouseButton.LeftButton)
    assert library.items() == [] and not gguf.path.exists()


def test_ctrl_m_opens_the_manager_and_load_switches_the_chat_model(qtbot, hub: FakeHub, make_window):
    window = make_window(start=False)
    qtbot.keyClick(window, Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier)
    manager = window.model_manager
    assert manager is not None and manager.isVisible() and not manager.isModal()
    assert window.models_action in window.menuBar().actions()[0].menu().actions()
    manager.repo_page.machine_factory = lambda: CPU_ONLY
    open_repo(qtbot, manager)
    assert download(qtbot, manager, "Q4_K_M", until=("done", "failed")).state == "done"
    library = manager.library
    qtbot.waitUntil(lambda: any(isinstance(i, LocalFile) for i in library.items()), timeout=WAIT_MS)
    gguf = next(i for i in library.items() if isinstance(i, LocalFile))
    library.select(gguf)
    with qtbot.waitSignal(window.controller.model_changed, timeout=WAIT_MS):
        qtbot.mouseClick(library.load_button, Qt.MouseButton.LeftButton)
    assert window.session.model_path == str(gguf.path)
    assert window.show_models() is manager  # the same window, raised


def test_a_download_left_unfinished_is_offered_and_resumed_next_time(
        qtbot, hub: FakeHub, make_manager, tiny_quants: dict[str, Path]):
    stall = hub.fault(REPO, "Tiny-Llama-F16.gguf", stall_s=120, stall_after=STALL_AFTER, times=1)
    first = make_manager()
    open_repo(qtbot, first)
    download(qtbot, first, "F16", until=("running",))
    wait_for_the_stall(qtbot, stall)
    first.shutdown()  # the app closes mid-download
    assert partial_size() == STALL_AFTER
    before = len(hub.requests)
    second = make_manager()
    panel = second.downloads
    qtbot.waitUntil(lambda: bool(panel.interrupted), timeout=WAIT_MS)
    assert "Tiny-Llama-F16.gguf" in panel.interrupted_label.text()
    with qtbot.waitSignal(second.bridge.started, timeout=WAIT_MS) as started:
        qtbot.mouseClick(panel.resume_all_button, Qt.MouseButton.LeftButton)
    row = panel.row(started.args[0].id)
    qtbot.waitUntil(lambda: row.state in ("done", "failed"), timeout=WAIT_MS)
    assert row.state == "done", row.status.text()
    assert f16_ranges(hub, before) == [f"bytes={STALL_AFTER}-"]  # from the partial file, not from byte 0
    local = next(Path(os.environ["HF_HOME"]).rglob("Tiny-Llama-F16.gguf"))
    assert sha256(local) == sha256(tiny_quants["F16"])


def test_import_a_gguf_by_path_and_forget_it(qtbot, make_manager, starter_model: Path, not_a_model: Path,
                                            monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # an empty cache, whatever this machine has
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    loaded: list[str] = []
    library = make_manager(loaded=loaded).library
    monkeypatch.setattr(library_page, "choose_gguf", lambda parent: str(not_a_model))
    qtbot.mouseClick(library.import_button, Qt.MouseButton.LeftButton)
    assert "not a GGUF file" in library.summary.text() and library.items() == []
    monkeypatch.setattr(library_page, "choose_gguf", lambda parent: str(starter_model))
    qtbot.mouseClick(library.import_button, Qt.MouseButton.LeftButton)
    [model] = library.items()
    assert library.selected() == model and model.path == starter_model.resolve()
    qtbot.mouseClick(library.load_button, Qt.MouseButton.LeftButton)
    assert loaded == [str(starter_model.resolve())]
    monkeypatch.setattr(library_page, "confirm_delete", lambda parent, what: "stays on disk" in what)
    qtbot.mouseClick(library.delete_button, Qt.MouseButton.LeftButton)
    assert library.items() == [] and starter_model.exists()


def test_the_repo_page_offers_the_familys_draft_model_and_opens_it(hub: FakeHub, tiny_quants, make_manager, qtbot):
    hub.add_repo("Qwen/Qwen2.5-7B-Instruct-GGUF", hub_repos.gguf_repo_files(tiny_quants, stem="qwen2.5-7b-instruct"),
                 tags=["gguf"])
    hub.add_repo("Qwen/Qwen2.5-0.5B-Instruct-GGUF", {"qwen2.5-0.5b-instruct-q8_0.gguf": tiny_quants["Q8_0"]},
                 tags=["gguf"])
    manager = make_manager()
    open_repo(qtbot, manager)
    assert manager.repo_page.draft_hint.isHidden()  # a family we know no draft of
    open_repo(qtbot, manager, "Qwen/Qwen2.5-7B-Instruct-GGUF")
    hint = manager.repo_page.draft_hint
    assert not hint.isHidden()
    assert hint.text().startswith('Faster replies: <a href="Qwen/Qwen2.5-0.5B-Instruct-GGUF">')
    assert "(Qwen2.5, the same tokenizer) can draft for this model (speculative decoding)" in hint.text()
    with qtbot.waitSignal(manager.repo_page.loaded, timeout=WAIT_MS):
        hint.linkActivated.emit("Qwen/Qwen2.5-0.5B-Instruct-GGUF")  # what a click on the link sends
    assert manager.repo_page.repo_id == "Qwen/Qwen2.5-0.5B-Instruct-GGUF"
    assert manager.repo_page.draft_hint.isHidden()  # the draft itself gets no draft


def test_a_row_made_after_its_worker_started_follows_the_events_in_order(qtbot, tmp_path: Path):
    """The worker may reach "running" before the GUI thread makes the row; the "queued" posted before that still
    arrives after it. The row shows the states in the order they happened, never stepping back."""
    bridge = DownloadBridge(tmp_path / "hub")
    request = DownloadRequest(REPO, "a" * 40, (DownloadFile("Tiny-Llama-F16.gguf", "http://127.0.0.1:9/f", 10),))
    item = Download(1, request, {})
    item.state = "running"  # what the worker set before the row was made
    row = DownloadRow(item, bridge)
    qtbot.addWidget(row)
    shown = [(row.state, row.status.text())]
    for state in ("queued", "running", "done"):  # as posted: start()'s "queued", then the worker's
        row.apply_state(StateChanged(1, state))
        shown.append((row.state, row.status.text().split(" ·")[0]))
    assert shown == [("queued", "queued"), ("queued", "queued"), ("running", "downloading"), ("done", "done")]
    bridge.close()
