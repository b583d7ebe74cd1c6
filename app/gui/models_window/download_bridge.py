"""DownloadBridge: the Downloader seen from Qt.

The Downloader calls back on its worker threads; this object turns each event into a Qt
signal on the GUI thread (through `MainThread`, as every other background event is).
Nothing here touches a widget.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.gui.common.main_thread import MainThread
from models.download.downloader import Downloader
from models.download.handle import Download
from models.download.request import DownloadRequest, Progress, StateChanged


class DownloadBridge(QObject):
    """Owns one Downloader and relays its events as Qt signals on the GUI thread.

    Args:
        cache_dir: the hub cache (default: the standard one, from HF_HOME / HF_HUB_CACHE).
        parent: the Qt parent.
        **options: passed to Downloader (stall_timeout_s, backoff_s...).

    Signals:
        started(object): a new `Download` was queued (its request, its id).
        progress(object): a `Progress` event.
        state_changed(object): a `StateChanged` event (queued, running, paused, done, failed, cancelled).
    """

    started = Signal(object)
    progress = Signal(object)
    state_changed = Signal(object)

    def __init__(self, cache_dir: Path | str | None = None, parent: QObject | None = None, **options: object):
        super().__init__(parent)
        on_event = MainThread(self).relay(self._dispatch)
        self.downloader = Downloader(cache_dir, on_event=on_event, **options)  # type: ignore[arg-type]

    def _dispatch(self, event: object) -> None:
        if isinstance(event, Progress):
            self.progress.emit(event)
        elif isinstance(event, StateChanged):
            self.state_changed.emit(event)

    def start(self, request: DownloadRequest, headers: dict[str, str] | None = None) -> Download:
        """Queue a download; `started` is emitted before any of its events arrive."""
        item = self.downloader.start(request, headers)
        self.started.emit(item)
        return item

    def pause(self, download_id: int) -> None:
        self.downloader.pause(download_id)

    def resume(self, download_id: int) -> None:
        self.downloader.resume(download_id)

    def cancel(self, download_id: int) -> None:
        self.downloader.cancel(download_id)

    def close(self, timeout: float = 10.0) -> None:
        """Pause what runs (partial files kept for the next start) and wait for the threads."""
        self.downloader.close(timeout)
