"""LibraryPage: the models on disk (the Hugging Face cache and imported GGUF files).

Load, Delete (asks first; an imported file is only forgotten), Open folder, Import GGUF (by path, not copied).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QUrl, Signal, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.gui.common.dialogs import confirm
from app.gui.models_window.formatting import human_size
from models.library import ImportedModel, Item, LocalFile, LocalRepo, ModelStore, StoreError

ITEM_ROLE = 0x0100  # Qt.ItemDataRole.UserRole


def confirm_delete(parent: QWidget, what: str) -> bool:
    """Ask before deleting a model from disk (tests replace this function)."""
    return confirm(parent, "Delete model", f"Delete {what} from disk? This cannot be undone.")


def open_folder(path: Path) -> bool:
    """Show `path` in the file manager (tests replace this function)."""
    return QDesktopServices.openUrl(QUrl.fromLocalFile(str(path)))


def choose_gguf(parent: QWidget) -> str:
    """Ask for a GGUF file to import; "" when cancelled (tests replace this function)."""
    path, _ = QFileDialog.getOpenFileName(parent, "Import a GGUF model", "", "GGUF models (*.gguf);;All files (*)")
    return path


def describe(item: Item) -> str:
    if isinstance(item, LocalRepo):
        return f"{item.repo_id} ({human_size(item.size)})"
    if isinstance(item, LocalFile):
        return f"{item.path_in_repo} of {item.repo_id} ({human_size(item.size)})"
    if isinstance(item, ImportedModel):
        return f"the imported file {item.path} (only forgotten: the file stays on disk)"
    return str(item)


def gguf_to_load(item: Item | None) -> Path | None:
    """The GGUF file that Load opens for `item`: the file itself, or a repo's first GGUF file."""
    if isinstance(item, LocalFile):
        return item.path if item.is_gguf else None
    if isinstance(item, ImportedModel):
        return item.path if item.exists else None
    if isinstance(item, LocalRepo):
        files = [f for f in item.gguf_files if "mmproj" not in f.path_in_repo.lower()]
        return files[0].path if files else None
    return None


class LibraryPage(QWidget):
    """The local library.

    Args:
        store: the model store.
        parent: the Qt parent.

    Signals:
        load_requested(str): the user asked to chat with this GGUF file.
    """

    load_requested = Signal(str)

    def __init__(self, store: ModelStore, parent: QWidget | None = None):
        super().__init__(parent)
        self.store = store
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Model", "Size"])
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tree.setColumnWidth(0, 520)
        self.summary = QLabel("", wordWrap=True)
        self.load_button = QPushButton("Load")
        self.delete_button = QPushButton("Delete…")
        self.folder_button = QPushButton("Open folder")
        self.import_button = QPushButton("Import GGUF…")
        self.refresh_button = QPushButton("Refresh")
        buttons = QHBoxLayout()
        for b in (self.load_button, self.delete_button, self.folder_button, self.import_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        buttons.addWidget(self.refresh_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(self.tree, 1)
        layout.addLayout(buttons)
        self.load_button.clicked.connect(self.load_selected)
        self.delete_button.clicked.connect(self.delete_selected)
        self.folder_button.clicked.connect(self.open_selected_folder)
        self.refresh_button.clicked.connect(self.refresh)
        self.import_button.clicked.connect(self.import_file)
        self.tree.itemActivated.connect(lambda *_: self.load_selected())
        self.tree.currentItemChanged.connect(lambda *_: self._update_buttons())
        self.refresh()

    @Slot()
    def refresh(self) -> None:
        """Read the store again and show it."""
        try:
            library = self.store.list()
        except (OSError, StoreError) as exc:
            self.summary.setText(f"Cannot read the model folder: {exc}")
            return
        self.tree.clear()
        for repo in library.repos:
            top = self._add(None, repo, repo.repo_id + ("" if repo.complete else " (incomplete)"), repo.size)
            for revision in repo.revisions:
                for f in revision.files:
                    self._add(top, f, f.path_in_repo, f.size)
            top.setExpanded(True)
        for model in library.imported:
            self._add(None, model, f"{model.path}" + ("" if model.exists else " (missing)"), model.size)
        count = len(library.repos) + len(library.imported)
        self.summary.setText(
            f"{count} models · {human_size(library.total_size)} on disk · {self.store.cache_dir}"
            if count else f"No models yet in {self.store.cache_dir}. Search the hub and download one."
        )
        self._update_buttons()

    def _add(self, parent: QTreeWidgetItem | None, item: Item, text: str, size: int) -> QTreeWidgetItem:
        node = QTreeWidgetItem([text, human_size(size)])
        node.setData(0, ITEM_ROLE, item)
        if parent is None:
            self.tree.addTopLevelItem(node)
        else:
            parent.addChild(node)
        return node

    def items(self) -> list[Item]:
        """Every listed item, repos before their files."""
        out = []
        for i in range(self.tree.topLevelItemCount()):
            top = self.tree.topLevelItem(i)
            out.append(top.data(0, ITEM_ROLE))
            out += [top.child(j).data(0, ITEM_ROLE) for j in range(top.childCount())]
        return out

    def select(self, item: Item) -> None:
        """Select the row of `item` (compared by equality)."""
        for i in range(self.tree.topLevelItemCount()):
            top = self.tree.topLevelItem(i)
            for node in [top] + [top.child(j) for j in range(top.childCount())]:
                if node.data(0, ITEM_ROLE) == item:
                    self.tree.setCurrentItem(node)
                    return
        raise KeyError(item)

    def selected(self) -> Item | None:
        node = self.tree.currentItem()
        return node.data(0, ITEM_ROLE) if node is not None else None

    def _update_buttons(self) -> None:
        item = self.selected()
        self.load_button.setEnabled(gguf_to_load(item) is not None)
        self.delete_button.setEnabled(item is not None)
        self.folder_button.setEnabled(item is not None)

    @Slot()
    def load_selected(self) -> None:
        path = gguf_to_load(self.selected())
        if path is not None:
            self.load_requested.emit(str(path))

    @Slot()
    def delete_selected(self) -> None:
        item = self.selected()
        if item is None or not confirm_delete(self, describe(item)):
            return
        try:
            self.store.delete(item)
        except (OSError, StoreError) as exc:
            self.summary.setText(f"Cannot delete {describe(item)}: {exc}")
            return
        self.refresh()

    @Slot()
    def import_file(self) -> None:
        """Add a GGUF file from anywhere to the library, by its path (the file is not copied)."""
        path = choose_gguf(self)
        if not path:
            return
        try:
            model = self.store.import_gguf(path)
        except StoreError as exc:
            self.summary.setText(str(exc))
            return
        self.refresh()
        self.select(model)

    @Slot()
    def open_selected_folder(self) -> None:
        item = self.selected()
        if item is not None:
            open_folder(self.store.open_folder_path(item))
