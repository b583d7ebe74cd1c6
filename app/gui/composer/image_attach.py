"""Attaching images to the next message: the Attach button (Ctrl+Shift+A), drops and pastes on the message box,
and the strip of thumbnails above it; and, when the model loaded cannot see, which models of the library can.

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
from app.gui.composer.attachments import Attachments
from app.gui.composer.message_box import IMAGE_SUFFIXES, Composer

SHORTCUT = "Ctrl+Shift+A"
_FILTER = "Images (" + " ".join(f"*{s}" for s in sorted(IMAGE_SUFFIXES)) + ")"


class ImageAttach(QObject):
    """The images of the next message, however they come.

    Args:
        composer: the message box (its drops and pastes of images come here).
        sees: whether the model loaded now takes images (None: no model loaded yet).
        model_name: the loaded model's name, for the notice that it cannot see.
        vision_models: the library's models that can see (their labels); called in the background.
        parent: the Qt parent; dialogs open over `parent_widget`.

    Signals:
        notice(str): a line for the status bar (an image refused, a model that cannot see).
    """

    notice = Signal(str)

    def __init__(self, composer: Composer, sees: Callable[[], bool | None], model_name: Callable[[], str],
                 vision_models: Callable[[], list[str]], parent_widget: QWidget | None = None):
        super().__init__(parent_widget)
        self._sees, self._model_name, self._vision_models = sees, model_name, vision_models
        self._parent_widget = parent_widget
        self._jobs = Jobs(self, max_threads=1)
        self.strip = Attachments()
        self.strip.refused.connect(self.notice)
        self.button = QToolButton()
        self.button.setIcon(QIcon.fromTheme("mail-attachment"))
        self.button.setText("Attach")
        self.button.setToolTip(f"Attach images to the message ({SHORTCUT}); or drop or paste them in the box")
        self.button.setAccessibleName("Attach images")
        self.button.clicked.connect(self.choose)
        composer.files_given.connect(self.add_files)
        composer.image_pasted.connect(self.add_image)

    @Slot()
    def choose(self) -> None:
        """The file dialog (several files at once)."""
        names, _ = QFileDialog.getOpenFileNames(self._parent_widget, "Attach images", "", _FILTER)
        if names:
            self.add_files([Path(n) for n in names])

    @Slot(list)
    def add_files(self, paths: list[Path]) -> None:
        self.strip.add_files(list(paths))
        self._say_if_blind()

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


def blind_notice(model: str, can_see: list[str]) -> str:
    """The line that says the model cannot see, and what can."""
    line = f"{model} cannot see images: it has no projector (mmproj)."
    if can_see:
        shown = ", ".join(can_see[:3]) + (f" and {len(can_see) - 3} more" if len(can_see) > 3 else "")
        return f"{line} In your library these can: {shown}."
    return (f"{line} None of your library's models can: get a vision model with its mmproj file from the "
            "Models window (Ctrl+M), e.g. a Gemma 3 or Qwen2.5-VL GGUF.")
