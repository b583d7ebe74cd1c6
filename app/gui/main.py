"""Entry point of the window: `main(argv)` builds the app and runs it."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from PySide6.QtWidgets import QApplication, QMessageBox

from app.gui.chat_controller import ChatController
from app.gui.common.app_icon import app_icon
from app.gui.common.app_settings import app_settings
from app.gui.dialogs.crash import CrashReporter
from app.gui.dialogs.preferences import apply_preferences_at_start
from app.gui.dialogs.welcome import maybe_show_first_run
from app.gui.main_window import MainWindow
from app.gui.single_instance import SingleInstance, bring_to_front, server_name
from app.services.history.backup import start_daily_backup
from app.services.history.opening import Connector, open_sqlite
from app.services.history.store import ChatStore, StoreDamagedError, StoreError
from app.services.log_setup import configure_logging
from app.services.paths import AppPaths
from app.services.planning.draft_finder import library_drafts
from app.services.planning.load_planner import LoadPlanner
from engine.client import EngineClient
from engine.starter import StarterModelMissing, starter_model_path


def build_window(
    db_path: Path | None, model_path: str, log_path: Path | None, *, connect: Connector = open_sqlite
) -> MainWindow:
    """A window over the given chat history and engine; the engine is not started yet.

    A history that cannot be written opens read-only, one that cannot be read opens empty with
    the offer to recover it (the window's history banner says which); today's backup of a
    healthy one is made in the background.

    Raises:
        StoreError: the history cannot be opened at all (a newer Tailor wrote it, or it cannot be read).
    """
    store = open_store(db_path, connect)
    if store.writable:
        start_daily_backup(store.path)
    paths = AppPaths.default()
    planner = LoadPlanner(prefix_cache_dir=paths.prefix_cache, drafts=library_drafts(paths.data_dir))
    controller = ChatController(
        store, model_path, planner, lambda on_event: EngineClient(on_event=on_event, log_path=log_path)
    )
    window = MainWindow(controller)
    controller.setParent(window)
    return window


def open_store(db_path: Path | None, connect: Connector = open_sqlite) -> ChatStore:
    """The chat history, or an empty stand-in for a damaged one (the window offers to recover it)."""
    try:
        return ChatStore(db_path, connect=connect)
    except StoreDamagedError as exc:
        logging.getLogger(__name__).warning("%s", exc)
        return ChatStore.unavailable(exc, connect=connect)


def main(argv: list[str] | None = None) -> int:
    """Open the Tailor window; returns the exit code."""
    argv = list(sys.argv if argv is None else argv)
    parser = argparse.ArgumentParser(prog="tailor", description="Chat with a local language model.")
    parser.add_argument("--model", help="GGUF file to load (default: the built-in starter model)")
    parser.add_argument("--db", type=Path, help="chat history file (default: in the user data folder)")
    args, qt_args = parser.parse_known_args(argv[1:])
    app = QApplication.instance() or QApplication([argv[0], *qt_args])
    app.setApplicationName("Tailor")
    app.setDesktopFileName("tailor")  # assets/tailor.desktop: the shell's icon and name for the window
    app.setWindowIcon(app_icon())
    # Theme, font size and models folder first: the window and the hub cache are built after.
    apply_preferences_at_start(app, app_settings())
    paths = AppPaths.default()
    log_file = configure_logging(paths.app_log)
    instance = SingleInstance(server_name(paths), parent=app)
    if not instance.claim():
        logging.getLogger(__name__).info("Tailor is already running: asked its window to come to the front")
        return 0
    reporter = CrashReporter(log_file, parent=app).install()
    try:
        return _run(app, args, paths, instance)
    finally:
        reporter.uninstall()
        instance.close()
        reporter.deleteLater()
        instance.deleteLater()


def _run(app: QApplication, args: argparse.Namespace, paths: AppPaths, instance: SingleInstance) -> int:
    problem = None
    model = args.model
    if model is None:
        try:
            model = str(starter_model_path())
        except StarterModelMissing as exc:
            model, problem = "", str(exc)
    try:
        window = build_window(args.db, model, paths.engine_log)
    except StoreError as exc:
        QMessageBox.critical(None, "Tailor", str(exc))
        return 1
    instance.activation_requested.connect(lambda: bring_to_front(window))
    window.show()
    maybe_show_first_run(app_settings(), window.help_menu.show_welcome)
    if problem:
        window.banner.show_problem(problem, False)
    else:
        window.session.start()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
