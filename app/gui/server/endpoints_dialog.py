"""EndpointsDialog: add, remove and pick the remote OpenAI-compatible servers to chat with."""

from __future__ import annotations

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.remote.endpoints import EndpointError, EndpointStore
from app.remote.openai_client import RemoteEndpoint


class EndpointsDialog(QDialog):
    """The saved endpoints, a form to add one, and the buttons that switch the chat.

    Args:
        store: the saved endpoints (keys in the keyring or a private file).
        parent: the Qt parent.

    Signals:
        remote_chosen(object): a RemoteEndpoint (with its key) to chat with.
        local_chosen(): chat with the local model again.
    """

    remote_chosen = Signal(object)
    local_chosen = Signal()

    def __init__(self, store: EndpointStore, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Remote servers")
        self.store = store
        self.list = QListWidget()
        self.name = QLineEdit(placeholderText="e.g. GPU cluster")
        self.url = QLineEdit(placeholderText="http://gpu-box:8000/v1")
        self.model = QLineEdit(placeholderText="the model name the server knows, e.g. Qwen/Qwen2.5-72B-Instruct")
        self.key = QLineEdit(placeholderText="optional", echoMode=QLineEdit.EchoMode.Password)
        self.message = QLabel(f"Keys are kept in {store.keys.where}.", wordWrap=True)
        self.save_button = QPushButton("Save")
        self.remove_button = QPushButton("Remove")
        self.chat_button = QPushButton("Chat with this server")
        self.local_button = QPushButton("Use the local model")
        form = QFormLayout()
        for label, field in (("Name", self.name), ("Address", self.url), ("Model", self.model), ("API key", self.key)):
            form.addRow(label, field)
        row = QHBoxLayout()
        for button in (self.save_button, self.remove_button, self.chat_button, self.local_button):
            row.addWidget(button)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.list)
        layout.addLayout(form)
        layout.addWidget(self.message)
        layout.addLayout(row)
        layout.addWidget(close)
        self.save_button.clicked.connect(self.save)
        self.remove_button.clicked.connect(self.remove)
        self.chat_button.clicked.connect(self.choose)
        self.local_button.clicked.connect(self._choose_local)
        self.list.currentTextChanged.connect(self._show)
        self.refresh()

    def refresh(self) -> None:
        self.list.clear()
        self.list.addItems([e.name for e in self.store.list()])

    @Slot()
    def save(self) -> bool:
        try:
            saved = self.store.add(self.name.text(), self.url.text(), self.model.text(), self.key.text() or None)
        except EndpointError as exc:
            self.message.setText(str(exc))
            return False
        self.refresh()
        self.list.setCurrentRow([e.name for e in self.store.list()].index(saved.name))
        self.message.setText(f"Saved {saved.name} ({saved.url}).")
        return True

    @Slot()
    def remove(self) -> None:
        item = self.list.currentItem()
        if item is not None:
            name = item.text()
            self.store.remove(name)
            self.refresh()
            self.message.setText(f"Removed {name}.")

    @Slot()
    def choose(self) -> RemoteEndpoint | None:
        """Chat with the selected endpoint (the form is saved first when it names a new one)."""
        item = self.list.currentItem()
        name = item.text() if item is not None else self.name.text().strip()
        if self.store.get(name) is None and not self.save():
            return None
        endpoint = self.store.endpoint(name or self.name.text().strip())
        if endpoint is None:
            return None
        self.remote_chosen.emit(endpoint)
        self.accept()
        return endpoint

    @Slot()
    def _choose_local(self) -> None:
        self.local_chosen.emit()
        self.accept()

    @Slot(str)
    def _show(self, name: str) -> None:
        saved = self.store.get(name)
        if saved is None:
            return
        self.name.setText(saved.name)
        self.url.setText(saved.url)
        self.model.setText(saved.model)
        self.key.setText(self.store.keys.get(saved.name) or "")
