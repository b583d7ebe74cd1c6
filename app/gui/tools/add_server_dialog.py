"""AddServerDialog: a small form for one MCP server: a name, then a command with its arguments and environment,
or a URL with its headers. What is wrong is said in one line under the form, which stays open."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from app.gui.common.theme import set_tone
from app.gui.tools.server_entry import server_config
from app.mcp.types import ServerConfig


def _pairs_box(placeholder: str) -> QPlainTextEdit:
    box = QPlainTextEdit()
    box.setPlaceholderText(placeholder)
    box.setTabChangesFocus(True)
    box.setFixedHeight(box.fontMetrics().lineSpacing() * 4 + 12)
    return box


class AddServerDialog(QDialog):
    """The form; `config` is the server once accepted (added).

    Args:
        add: adds the server to the configuration (ValueError or OSError: it could not, and why).
        parent: the servers dialog.
    """

    def __init__(self, add: Callable[[ServerConfig], None], parent: QWidget | None = None):
        super().__init__(parent)
        self._add = add
        self.setWindowTitle("Add an MCP server")
        self.config: ServerConfig | None = None
        self.name = QLineEdit(placeholderText="files")
        self.by_command = QRadioButton("Run a command (stdio)", checked=True)
        self.by_url = QRadioButton("Connect to a URL (streamable HTTP)")
        self.command = QLineEdit(placeholderText="npx")
        self.args = QLineEdit(placeholderText="-y @modelcontextprotocol/server-filesystem ~/notes")
        self.env = _pairs_box("KEY=VALUE, one a line")
        self.url = QLineEdit(placeholderText="https://example.com/mcp")
        self.headers = _pairs_box("Authorization=Bearer …, one a line")
        self.problem = QLabel(wordWrap=True)
        set_tone(self.problem, "error")
        self.problem.hide()
        form = QFormLayout()
        form.addRow("Name", self.name)
        form.addRow(self.by_command)
        form.addRow("Command", self.command)
        form.addRow("Arguments", self.args)
        form.addRow("Environment", self.env)
        form.addRow(self.by_url)
        form.addRow("URL", self.url)
        form.addRow("Headers", self.headers)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Add")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.problem)
        layout.addWidget(buttons)
        self.by_command.toggled.connect(self._follow_transport)
        self._follow_transport()

    def _follow_transport(self) -> None:
        command = self.by_command.isChecked()
        for field in (self.command, self.args, self.env):
            field.setEnabled(command)
        for field in (self.url, self.headers):
            field.setEnabled(not command)

    def read(self) -> ServerConfig:
        """The form as a ServerConfig; ValueError saying what is wrong."""
        if self.by_command.isChecked():
            return server_config(self.name.text(), command=self.command.text(), args=self.args.text(),
                                 env=self.env.toPlainText())
        return server_config(self.name.text(), url=self.url.text(), headers=self.headers.toPlainText())

    def accept(self) -> None:
        try:
            config = self.read()
            self._add(config)
        except (ValueError, OSError) as error:
            self.show_problem(str(error) or type(error).__name__)
            return
        self.config = config
        super().accept()

    def show_problem(self, text: str) -> None:
        self.problem.setText(text)
        self.problem.show()
