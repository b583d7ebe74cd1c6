"""ModelManager: the Models window (non-modal) with its Search, Repo, Downloads and Library tabs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Slot
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QTabWidget, QVBoxLayout, QWidget

from app.gui.common.jobs import Jobs
from app.gui.models_window.download_bridge import DownloadBridge
from app.gui.models_window.downloads_panel import DownloadsPanel
from app.gui.models_window.library_page import LibraryPage
from app.gui.models_window.repo_page import RepoPage, this_machine
from app.gui.models_window.search_page import SearchPage
from app.services.paths import AppPaths
from models.download.request import DownloadRequest, StateChanged
from models.hub.client import HubClient
from models.library import ModelStore
from models.plan.machine import Machine

TAB_SEARCH, TAB_REPO, TAB_DOWNLOADS, TAB_LIBRARY = range(4)


class ModelManager(QWidget):
    """Find, download and manage models; Load hands a GGUF file to `load_model`.

    Closing the window only hides it: downloads go on. `shutdown` pauses them (their partial
    files are kept, and the next session offers to continue them) and waits for the background jobs.

    Args:
        load_model: called with a GGUF path when the user presses Load (the chat switches to it).
        store: the local library; default: the standard HF cache and Tailor's data folder.
        client_factory: makes HubClients (on pool threads); default `HubClient()` (HF_ENDPOINT).
        machine_factory: the hardware the verdicts are for; default: this machine.
        cache_dir: where downloads go; default: the standard HF cache.
        parent: the Qt parent (the main window); the manager is a window of its own.
    """

    def __init__(
        self,
        load_model: Callable[[str], object],
        store: ModelStore | None = None,
        client_factory: Callable[[], HubClient] = HubClient,
        machine_factory: Callable[[], Machine] = this_machine,
        cache_dir: Path | str | None = None,
        parent: QWidget | None = None,
    ):
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle("Tailor — Models")
        self.resize(980, 640)
        self.load_model = load_model
        self.store = store or ModelStore(AppPaths.default().data_dir, cache_dir)
        self.jobs = Jobs(self)
        self.bridge = DownloadBridge(cache_dir if cache_dir is not None else self.store.cache_dir, self)
        self.search_page = SearchPage(self.jobs, client_factory)
        self.repo_page = RepoPage(self.jobs, client_factory, machine_factory)
        self.downloads = DownloadsPanel(self.bridge)
        self.library = LibraryPage(self.store)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.search_page, "Search")
        self.tabs.addTab(self.repo_page, "Repo")
        self.tabs.addTab(self.downloads, "Downloads")
        self.tabs.addTab(self.library, "Library")
        QVBoxLayout(self).addWidget(self.tabs)
        self.search_page.repo_chosen.connect(self.open_repo)
        self.repo_page.repo_requested.connect(self.open_repo)
        self.repo_page.download_requested.connect(self.start_download)
        self.library.load_requested.connect(self._load)
        self.bridge.state_changed.connect(self._on_download_state)
        self.downloads.resume_interrupted.connect(self.resume_interrupted)
        self._client_factory = client_factory
        self._closed = False
        self._start_up()

    def _start_up(self) -> None:
        """Clean abandoned partial files, then offer the downloads a previous session left unfinished."""
        downloader = self.bridge.downloader

        def work() -> list[DownloadRequest]:
            downloader.clean_stale_partials()
            return downloader.pending_requests()

        self.jobs.run(work, self.downloads.show_interrupted, lambda exc: None)

    @Slot(object)
    def resume_interrupted(self, requests: list[DownloadRequest]) -> None:
        """Continue `requests` from their partial files (those not already running here)."""
        running = {d.request.key for d in self.bridge.downloader.downloads()}
        headers = self._client_factory().auth_headers()
        for request in requests:
            if request.key not in running:
                self.start_download(request, headers)

    @Slot(str)
    def open_repo(self, repo_id: str) -> None:
        """Show the repo page of `repo_id`."""
        self.repo_page.load(repo_id)
        self.tabs.setCurrentIndex(TAB_REPO)

    @Slot(object, object)
    def start_download(self, request: DownloadRequest, headers: dict[str, str] | None = None) -> int:
        """Queue a download and show the Downloads tab; the download's id."""
        item = self.bridge.start(request, headers)
        self.tabs.setCurrentIndex(TAB_DOWNLOADS)
        return item.id

    @Slot(str)
    def _load(self, path: str) -> None:
        self.load_model(path)

    @Slot(object)
    def _on_download_state(self, event: StateChanged) -> None:
        if event.state in ("done", "cancelled"):
            self.library.refresh()

    def shutdown(self) -> None:
        """Pause the downloads (resumable later) and wait for the background jobs; idempotent."""
        if self._closed:
            return
        self._closed = True
        self.bridge.close()
        self.jobs.wait()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        event.accept()  # hidden, not destroyed: downloads go on while the window is closed
