"""Chat → Export… (Ctrl+Shift+E) and Import… (Ctrl+Shift+I): chats out of the history and into it.

Both run on a background thread (transfer_jobs.py), each with its own connection to the history file,
so a large history or a 200 MB conversations.json never holds up the window: an export says where it
wrote in the status bar; an import shows its progress there with Cancel, then draws the chat list
again and says how many chats came in. The dialogs are module functions the tests replace.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from app.chat.session import ChatSession
from app.gui.common.jobs import Jobs
from app.gui.common.main_thread import MainThread
from app.gui.transfer.export_dialog import FORMATS, ExportChoice, ExportDialog
from app.gui.transfer.import_progress import ImportProgressBar
from app.services.transfer.export import safe_filename
from app.services.transfer.importer import ImportProgress, ImportResult
from app.services.transfer.jobs import export_chats, import_chats, import_summary
from app.services.transfer.user_files import TargetExists

log = logging.getLogger(__name__)
NOTICE_MS = 8000
RESULT_MS = 20_000  # an import's outcome stays longer: the user may have looked away meanwhile
NOT_WRITABLE = "Nothing can be imported: the chat history cannot be saved to (see the banner)."


def choose_export(parent: QWidget, current_title: str | None) -> ExportChoice | None:
    """What to export, or None when the user cancelled."""
    dialog = ExportDialog(parent, current_title)
    try:
        return dialog.choice() if dialog.exec() else None
    finally:
        dialog.deleteLater()


def save_file_path(parent: QWidget, suggested: str, file_filter: str) -> str:
    """The file to export to ("" when cancelled)."""
    return QFileDialog.getSaveFileName(parent, "Export chats", suggested, file_filter)[0]


def export_folder_path(parent: QWidget) -> str:
    """The folder to export a file per chat into ("" when cancelled)."""
    return QFileDialog.getExistingDirectory(parent, "Export chats into a folder", str(Path.home()))


def confirm_replace(parent: QWidget, text: str) -> bool:
    """Whether the user agrees to replace the files `text` names."""
    answer = QMessageBox.question(parent, "Replace files?", text,
                                  QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
                                  QMessageBox.StandardButton.Cancel)
    return answer == QMessageBox.StandardButton.Yes


def import_file_path(parent: QWidget) -> str:
    """The export to import ("" when cancelled)."""
    return QFileDialog.getOpenFileName(
        parent, "Import chats", str(Path.home()),
        "Chat exports (*.json);;All files (*)",
    )[0]


def _replace_question(paths: list[Path], target: Path, each: bool) -> str:
    if not each:
        return f"{target.name} already exists in {target.parent}. Replace it?"
    names = "\n".join(p.name for p in paths[:5]) + ("\n…" if len(paths) > 5 else "")
    count = len(paths)
    return f"{count} file{'' if count == 1 else 's'} of these chats already exist in {target}:\n\n{names}\n\nReplace them?"


class ChatTransfer(QObject):
    """Export… and Import… (its `export_action` and `import_action`, for the window's Chat menu), run on
    background threads; an import's progress with Cancel is `progress`, for the status bar.

    Args:
        session: the chat session (its history and open chat).
        parent: the widget the dialogs open over (the window); the actions' parent.

    Signals:
        notice(str, int): what happened, for the status bar, and for how many milliseconds.
        chats_changed(): an import ended (or failed): the chat list is to be drawn again.
    """

    notice = Signal(str, int)
    chats_changed = Signal()

    def __init__(self, session: ChatSession, parent: QWidget):
        super().__init__(parent)
        self.session, self._parent = session, parent
        self.jobs = Jobs(self, max_threads=2)  # an export and an import may run side by side
        self._main = MainThread(self)
        self._cancel = threading.Event()
        self._latest: ImportProgress | None = None  # the newest progress, from the import's thread
        self._posted = False
        self.exporting = self.importing = False
        self.progress = ImportProgressBar()
        self.progress.cancel_requested.connect(self._cancel.set)
        self.export_action = self._action("Export…", "Ctrl+Shift+E", self.export)
        self.import_action = self._action("Import…", "Ctrl+Shift+I", self.import_)

    def _action(self, text: str, shortcut: str, slot: object) -> QAction:
        action = QAction(text, self._parent, shortcut=QKeySequence(shortcut))
        action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        action.triggered.connect(slot)
        return action

    def _say(self, text: str, ms: int = NOTICE_MS) -> None:
        self.notice.emit(text, ms)

    # ------------------------------------------------------------ export

    @Slot()
    def export(self) -> None:
        """Ask what, how and where; then write it in the background."""
        if self.exporting:
            self._say("An export is being written; wait for it to finish.")
            return
        current = self.session.current
        choice = choose_export(self._parent, current.title if current else None)
        if choice is None:
            return
        ext, file_filter = choice.fmt, FORMATS[choice.fmt][1]
        if choice.scope == "each":
            target = export_folder_path(self._parent)
        else:
            if choice.scope == "chat" and current is not None:
                uid = self.session.store.conversation_uid(current.id) or ""
                name = safe_filename(current.title, uid, ext)
            else:
                name = f"tailor-chats.{ext}"
            target = save_file_path(self._parent, str(Path.home() / name), file_filter)
        if not target:
            return
        # The save dialog asked before a file was replaced; a name it was given without an extension was not
        # asked about with one, and a folder's files were not asked about at all: those ask when they exist.
        confirmed = choice.scope != "each"
        if choice.scope != "each" and not Path(target).suffix:
            target, confirmed = target + f".{ext}", False  # a name typed without an extension
        ids = [current.id] if choice.scope == "chat" and current is not None else None
        self._start_export(ids, ext, Path(target), choice.scope == "each", confirmed, choice.embed_media)

    def _start_export(self, ids: list[int] | None, ext: str, path: Path, each: bool, overwrite: bool,
                      embed_media: bool = False) -> None:
        self.exporting = True
        self.export_action.setEnabled(False)
        self._say(f"Exporting to {path}…", 0)
        db = self.session.store.path

        def failed(exc: BaseException) -> None:
            if isinstance(exc, TargetExists) and not overwrite:
                self._export_done()
                if confirm_replace(self._parent, _replace_question(exc.paths, path, each)):
                    self._start_export(ids, ext, path, each, True, embed_media)
                else:
                    self._say("Export cancelled: nothing was replaced.")
                return
            self._export_failed(exc)

        problems: list[str] = []  # images and clips left out (their stored file gone or damaged), by the job
        self.jobs.run(lambda: export_chats(db, ids, ext, path, each, overwrite, embed_media=embed_media,
                                           problems=problems),
                      lambda count: self._exported(count, path, problems), failed)

    def _exported(self, count: int, path: Path, problems: list[str] = ()) -> None:
        self._export_done()
        left_out = ""
        if problems:
            log.warning("export left out: %s", "; ".join(problems))
            left_out = f"; {len(problems)} attached file{'' if len(problems) == 1 else 's'} left out: {problems[0]}"
        self._say(f"Exported {count} chat{'' if count == 1 else 's'} to {path}{left_out}", RESULT_MS)

    def _export_failed(self, exc: BaseException) -> None:
        self._export_done()
        log.warning("export failed: %s", exc)
        self._say(f"Export failed: {exc}", RESULT_MS)

    def _export_done(self) -> None:
        self.exporting = False
        self.export_action.setEnabled(True)

    # ------------------------------------------------------------ import

    @Slot()
    def import_(self) -> None:
        """Pick a file and import it in the background, with progress and Cancel."""
        if self.importing:
            self._say("An import is running; cancel it or wait for it to finish.")
            return
        if not self.session.store.writable:
            self._say(NOT_WRITABLE, RESULT_MS)
            return
        chosen = import_file_path(self._parent)
        if not chosen:
            return
        self.importing = True
        self.import_action.setEnabled(False)
        self._cancel.clear()
        self._latest, self._posted = None, False
        self.progress.start(Path(chosen).name)
        db, path = self.session.store.path, Path(chosen)
        self.jobs.run(lambda: import_chats(db, path, self._on_progress, self._cancel.is_set),
                      self._imported, self._import_failed)

    def _on_progress(self, progress: ImportProgress) -> None:
        """On the import's thread: keep the newest figures; one post at a time carries them over, so a fast
        import does not queue thousands of redraws."""
        self._latest = progress
        if not self._posted:
            self._posted = True
            self._main.post(self._show_progress)

    def _show_progress(self) -> None:
        self._posted = False  # first: progress that comes while this runs is posted again
        if self._latest is not None and self.importing:
            self.progress.show_progress(self._latest)

    def _imported(self, result: ImportResult) -> None:
        self._import_done()
        for problem in result.problems:
            log.info("import: %s", problem)
        self.chats_changed.emit()
        self._say(import_summary(result), RESULT_MS)

    def _import_failed(self, exc: BaseException) -> None:
        self._import_done()
        log.warning("import failed: %s", exc)
        self.chats_changed.emit()  # nothing should have changed; the list says so either way
        self._say(str(exc), RESULT_MS)

    def _import_done(self) -> None:
        self.importing = False
        self.import_action.setEnabled(True)
        self.progress.finish()

    @property
    def cancelling(self) -> bool:
        return self._cancel.is_set()

    def shutdown(self) -> None:
        """The window closes: stop an import after its current chat, and wait for what runs."""
        self._cancel.set()
        self.jobs.wait()
