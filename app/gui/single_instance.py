"""One Tailor window per user: a second launch asks the first to come to the front, then exits.

The first instance listens on a local socket (a Unix socket in the temp dir, a named pipe on Windows)
whose name is made from the user and the data folder, so two users, or a test run with its own
TAILOR_HOME, never see each other's window.
"""

from __future__ import annotations

import getpass
import hashlib
import logging

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtNetwork import QLocalServer, QLocalSocket
from PySide6.QtWidgets import QWidget

from app.services.paths import AppPaths

log = logging.getLogger(__name__)

ACTIVATE = b"activate\n"
CONNECT_MS = 1000


def server_name(paths: AppPaths | None = None) -> str:
    """The local socket name of this user's Tailor (per data folder)."""
    paths = paths or AppPaths.default()
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no login name (some containers)
        user = "user"
    digest = hashlib.sha256(f"{user}\0{paths.data_dir}".encode()).hexdigest()[:16]
    return f"tailor-{digest}"


class SingleInstance(QObject):
    """The first launch's server, or the messenger of a second launch.

    Args:
        name: the local socket name; default `server_name()`.
        parent: the Qt parent.

    Signals:
        activation_requested(): a second launch asked this one to show its window.
    """

    activation_requested = Signal()

    def __init__(self, name: str | None = None, parent: QObject | None = None):
        super().__init__(parent)
        self.name = name or server_name()
        self.server: QLocalServer | None = None

    def claim(self) -> bool:
        """True when this process is the first instance (and now listens); False after telling the first one.

        Listening is tried first, so two launches at the same moment cannot both remove each other's
        socket; a socket file left by a crashed instance answers no connection and is replaced.
        """
        server = QLocalServer(self)
        if not server.listen(self.name):
            if _tell_running_instance(self.name):
                server.deleteLater()
                return False
            log.info("removing a stale single-instance socket %s", self.name)
            QLocalServer.removeServer(self.name)
            if not server.listen(self.name):
                # Without the socket Tailor still works; only the focusing of a second launch is lost.
                log.warning("single-instance socket %s unavailable: %s", self.name, server.errorString())
                return True
        server.newConnection.connect(self._on_connection)
        self.server = server
        return True

    def close(self) -> None:
        """Stop listening (the socket file is removed); a later launch becomes the first instance."""
        if self.server is not None:
            self.server.close()
            self.server.deleteLater()
            self.server = None

    @Slot()
    def _on_connection(self) -> None:
        assert self.server is not None
        while (socket := self.server.nextPendingConnection()) is not None:
            # The messenger writes at once and goes: read it here rather than keep per-socket slots around.
            if socket.bytesAvailable() or socket.waitForReadyRead(CONNECT_MS):
                message = bytes(socket.readAll().data())
                if message.startswith(ACTIVATE.strip()):
                    self.activation_requested.emit()
            socket.disconnectFromServer()
            socket.deleteLater()


def _tell_running_instance(name: str) -> bool:
    """Ask the instance listening on `name` to show itself; False when none answers."""
    socket = QLocalSocket()
    socket.connectToServer(name)
    if not socket.waitForConnected(CONNECT_MS):
        return False
    socket.write(ACTIVATE)
    socket.waitForBytesWritten(CONNECT_MS)
    socket.disconnectFromServer()
    if socket.state() != QLocalSocket.LocalSocketState.UnconnectedState:
        socket.waitForDisconnected(CONNECT_MS)
    return True


def bring_to_front(window: QWidget) -> None:
    """Show a window that may be minimized or behind others, and give it the focus."""
    if window.isMinimized():
        window.showNormal()
    window.show()
    window.raise_()
    window.activateWindow()
