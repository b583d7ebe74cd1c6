"""Attaching images, audio clips and documents to the next message: the Attach button (Ctrl+Shift+A), drops and
pastes on the message box, and the strip above it; and, when the model loaded cannot see (or hear), which models of the
library can.

The window places `strip` and `button` and connects `notice` to its status bar (main_window.py); nothing here
reaches into the window.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtGui import QIcon, QImage
from PySide6.QtWidgets import QFileDialog, QToolButton, QWidget

from app.gui.common.jobs import Jobs
from app.gui.composer.attachments import Attachments, is_audio_path, is_document_path
from app.gui.composer.message_box import IMAGE_SUFFIXES, Composer
from app.services.documents.extract import KINDS
from app.services.media.sniff import AUDIO_FILE_SUFFIXES
from app.services.media.store import MediaStore

SHORTCUT = "Ctrl+Shift+A"


def _patterns(suffixes: frozenset[str]) -> str:
    return " ".join(f"*{s}" for s in sorted(suffixes))


_DOCUMENT_SUFFIXES = frozenset(s for s in KINDS if s)
_FILTERS = ";;".join([
    f"Images, audio and documents ({_patterns(IMAGE_SUFFIXES | AUDIO_FILE_SUFFIXES | _DOCUMENT_SUFFIXES)})",
    f"Images ({_patterns(IMAGE_SUFFIXES)})",
    f"Audio ({_patterns(AUDIO_FILE_SUFFIXES)})",
    f"Documents ({_patterns(_DOCUMENT_SUFFIXES)})",
    "All files (*)",
])


class MediaAttach(QObject):
    """The images and clips of the next message, however they come.

    Args:
        composer: the message box (its drops and pastes of images and audio files come here).
        sees: whether the model loaded now takes images (None: no model loaded yet).
        model_name: the loaded model's name, for the notice that it cannot see or hear.
        vision_models: the library's models that can see (their labels); called in the background.
        hears: whether the model loaded now takes audio (None: no model loaded yet).
        hearing_models: the library's models that can hear (their labels); called in the background.
        parent_widget: the Qt parent; dialogs open over it.
        media_store: the history's media store, where attached documents' originals are kept.

    Signals:
        notice(str): a line for the status bar (a file refused, a model that cannot see or hear).
    """

    notice = Signal(str)

    def __init__(self, composer: Composer, sees: Callable[[], bool | None], model_name: Callable[[], str],
                 vision_models: Callable[[], list[str]], parent_widget: QWidget | None = None, *,
                 hears: Callable[[], bool | None] = lambda: None,
                 hearing_models: Callable[[], list[str]] = list, media_store: MediaStore | None = None):
        super().__init__(parent_widget)
        self._sees, self._model_name, self._vision_models = sees, model_name, vision_models
        self._hears, self._hearing_models = hears, hearing_models
        self._parent_widget = parent_widget
        self._jobs = Jobs(self, max_threads=1)
        self.strip = Attachments(media_store=media_store)  # documents' originals kept there when attached
        self.strip.refused.connect(self.notice)
        self.button = QToolButton()
        self.button.setIcon(QIcon.fromTheme("mail-attachment"))
        self.button.setText("Attach")
        self.button.setToolTip(f"Attach images, audio (WAV) or documents (PDF, DOCX, text, code...) to the message "
                               f"({SHORTCUT}); or drop or paste them in the box")
        self.button.setAccessibleName("Attach images, audio or documents")
        self.button.clicked.connect(self.choose)
        composer.files_given.connect(self.add_files)
        composer.image_pasted.connect(self.add_image)

    @Slot()
    def choose(self) -> None:
        """The file dialog (several files at once)."""
        names, _ = QFileDialog.getOpenFileNames(self._parent_widget, "Attach images, audio or documents", "", _FILTERS)
        if names:
            self.add_files([Path(n) for n in names])

    @Slot(list)
    def add_files(self, paths: list[Path]) -> None:
        paths = list(paths)
        self.strip.add_files(paths)
        if any(not is_audio_path(p) and not is_document_path(p) for p in paths):
            self._say_if_blind()
        if any(is_audio_path(p) for p in paths):
            self._say_if_deaf()

    @Slot(QImage)
    def add_image(self, image: QImage) -> None:
        self.strip.add_qimage(image)
        self._say_if_blind()

    def _say_if_blind(self) -> None:
        """The model loaded cannot see: say so, and (found in the background) which models of the library can."""
        if self._sees() is not False:
            return
        name = self._model_name()
        self._jobs.run(self._vision_models, lambda found: self.notice.emit(blind_notice(name, found)),
                       lambda _exc: self.notice.emit(blind_notice(name, [])))

    def _say_if_deaf(self) -> None:
        """The model loaded cannot hear: say so, and (found in the background) which models of the library can."""
        if self._hears() is not False:
            return
        name = self._model_name()
        self._jobs.run(self._hearing_models, lambda found: self.notice.emit(deaf_notice(name, found)),
                       lambda _exc: self.notice.emit(deaf_notice(name, [])))

    def wait(self, timeout_ms: int = 10_000) -> bool:
        """Wait for the library to be searched (a test)."""
        return self._jobs.wait(timeout_ms)


def _shown(labels: list[str]) -> str:
    return ", ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")


def blind_notice(model: str, can_see: list[str]) -> str:
    """The line that says the model cannot see, and what can."""
    line = f"{model} cannot see images: it has no projector (mmproj)."
    if can_see:
        return f"{line} In your library these can: {_shown(can_see)}."
    return (f"{line} None of your library's models can: get a vision model with its mmproj file from the "
            "Models window (Ctrl+M), e.g. a Gemma 3 or Qwen2.5-VL GGUF.")


def deaf_notice(model: str, can_hear: list[str]) -> str:
    """The line that says the model cannot hear, and what can."""
    line = f"{model} cannot hear audio: it has no projector (mmproj) that takes audio."
    if can_hear:
        return f"{line} In your library these can: {_shown(can_hear)}."
    return (f"{line} None of your library's models can: get one whose projector hears, with its mmproj file, "
            "from the Models window (Ctrl+M), e.g. a Qwen2-Audio GGUF.")
