"""MainWindow: conversations on the left, the chat in the middle, one side panel with tabs on the right
(chat settings, memory and performance, the model plan; it collapses to an icon rail)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Slot
from PySide6.QtGui import QAction, QCloseEvent, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMainWindow, QPushButton

from app.chat.hints import BUSY_HINT
from app.gui.banners.history_banner import HistoryBanner, allow_changes
from app.gui.banners.problem_banner import Banner
from app.gui.chat_controller import ChatController
from app.gui.chat_list.conversation_list import ConversationList
from app.gui.common.plan_view import PlanLabel, PlanPage
from app.gui.common.status_labels import FittingLabel
from app.gui.composer.context_prompt import ContextPrompt
from app.gui.composer.message_box import Composer
from app.gui.dialogs.crash import open_log_folder
from app.gui.dialogs.preferences import install_preferences
from app.gui.dialogs.welcome import FirstRunDialog, app_settings
from app.gui.model_picker.picker import install_model_picker
from app.gui.models_window.manager_window import ModelManager
from app.gui.server.menu import ServerMenu
from app.gui.side_panel.settings.panel import SettingsPanel
from app.gui.transcript.view import ChatView
from app.gui.transfer.chat_transfer import ChatTransfer
from app.gui.window_geometry import restore_window, save_window
from app.gui.window_layout import PLAN, build_layout, build_view_menu
from app.gui.window_links import link_branches, link_folders
from app.services.history.store import Conversation, Message
from app.services.paths import AppPaths
from engine.protocol import MemoryReport

NOTICE_MS = 8000


class MainWindow(QMainWindow):
    """The Tailor window.

    Args:
        controller: the chat logic (store and engine).
    """

    def __init__(self, controller: ChatController):
        super().__init__()
        self.controller = controller  # its signals: what the chat says
        self._submitting = False
        self.session = controller.session  # its methods: what the user does
        self.setWindowTitle("Tailor")
        self.conversations = ConversationList()
        self.chat = ChatView()
        self.composer = Composer()
        self.settings_panel = SettingsPanel()
        self.banner = Banner()
        self.history_banner = HistoryBanner(self.session.store, self)  # the history read-only, full or damaged
        self.send_button = QPushButton("Send")
        self.stop_button = QPushButton("Stop")  # in the Send button's place while a reply streams
        self.stop_button.setEnabled(False)
        self.stop_button.setToolTip("Stop the reply (Esc)")
        build_layout(self)  # the splitter: chat list | chat column | side panel (window_layout)
        self._build_actions()
        self.view_menu = build_view_menu(self)
        # Each shortens itself to whole parts or words that fit, the full text in its tooltip.
        self.model_label = FittingLabel("No model")
        self.stats_label = FittingLabel("")
        self.memory_label = FittingLabel("")
        self.plan_label = PlanLabel("")
        self.statusBar().addWidget(self.model_label, 1)
        self.statusBar().addWidget(self.plan_label, 1)
        self.statusBar().addPermanentWidget(self.stats_label)
        self.statusBar().addPermanentWidget(self.memory_label)
        self._connect()
        self.model_picker = install_model_picker(self)  # the loaded model, switching, load progress with Cancel
        self.context_prompt = ContextPrompt(self)  # asks before a chat that outgrows its context is sent
        self.server_menu = ServerMenu(self)  # serve the loaded model; chat with a remote server
        self.chat_transfer = ChatTransfer(self)  # Chat → Export… and Import…
        self.preferences_action = install_preferences(self)  # Chat → Preferences… (Ctrl+,); new chats take its defaults
        self._open_initial()
        restore_window(self, app_settings())  # its size, splitter and side panel as last closed
        self.composer.setFocus()

    def _action(self, text: str, shortcut: QKeySequence | str, slot: object) -> QAction:
        action = QAction(text, self, shortcut=QKeySequence(shortcut))
        action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        action.triggered.connect(slot)
        self.addAction(action)
        return action

    def _build_actions(self) -> None:
        self.new_action = self._action("New chat", "Ctrl+N", self.new_conversation)
        self.stop_action = self._action("Stop", "Esc", self.stop)
        self.regenerate_action = self._action("Regenerate", "Ctrl+R", self.session.regenerate)
        self.copy_action = self._action("Copy last reply", "Ctrl+Shift+C", self.copy_last_reply)
        self.focus_action = self._action("Focus message box", "Ctrl+L", self.composer.setFocus)
        self.edit_action = self._action("Edit last message", "Ctrl+E", self.edit_last_message)
        self.open_action = self._action("Open model…", "Ctrl+O", self._choose_model)
        self.open_folder_action = self._action("Open model folder…", "Ctrl+Shift+O", self._choose_model_folder)
        self.plan_action = self._action("Model plan…", "Ctrl+I", self.show_plan)
        self.models_action = self._action("Models…", "Ctrl+M", self.show_models)
        self.model_manager: ModelManager | None = None
        menu = self.menuBar().addMenu("&Chat")
        menu.addActions([self.new_action, self.open_action, self.open_folder_action, self.plan_action, self.models_action])
        menu.addSeparator()
        menu.addActions([self.stop_action, self.regenerate_action, self.edit_action, self.copy_action])
        self.welcome_action = QAction("Welcome…", self)
        self.welcome_action.triggered.connect(self.show_welcome)
        self.welcome: FirstRunDialog | None = None
        help_menu = self.menuBar().addMenu("&Help")
        help_menu.addAction(self.welcome_action)
        # The folder of the tailor-*.log and engine-*.log files (one per process): what a bug report needs.
        self.open_log_action = help_menu.addAction(
            "Open log folder", lambda: open_log_folder(AppPaths.default().app_log)
        )

    def _connect(self) -> None:
        c, s = self.controller, self.session
        c.conversations_changed.connect(self.refresh_list)
        c.conversation_opened.connect(self._on_opened)
        c.message_added.connect(self.chat.append_message)
        c.stream_started.connect(self.chat.begin_stream)
        c.stream_text.connect(self.chat.append_stream)
        c.stream_reasoning.connect(self.chat.append_reasoning)
        c.stream_finished.connect(self.chat.end_stream)
        c.busy_changed.connect(self._on_busy)
        c.model_changed.connect(self.model_label.setText)
        # Every model switch (and a failed load that goes back to the last good one) says so here.
        c.model_changed.connect(lambda _text: self.settings_panel.set_model_path(s.model_path))
        self.settings_panel.set_model_path(s.model_path)
        c.context_loaded.connect(self.settings_panel.show_loaded_context)
        c.loaded.connect(lambda event: self.settings_panel.show_model_info(event.info))
        c.stats_changed.connect(self.stats_label.setText)  # its tooltip is the whole line
        c.notice.connect(lambda text: self.statusBar().showMessage(text, NOTICE_MS))
        c.problem.connect(self.banner.show_problem)
        c.problem_cleared.connect(self.banner.hide)
        self.banner.reload_button.clicked.connect(s.reload_engine)
        self.history_banner.reopened.connect(self._reopen_history)
        c.history_failed.connect(self._on_history_failed)
        c.memory.connect(self._on_memory)
        c.planned.connect(self.plan_label.show_plan)
        self.composer.submitted.connect(self.submit)
        self.send_button.clicked.connect(lambda: self.submit(self.composer.toPlainText()))
        self.stop_button.clicked.connect(self.stop)
        self.conversations.selected.connect(self._select)
        self.conversations.new_requested.connect(self.new_conversation)
        self.conversations.rename_requested.connect(s.rename_conversation)
        self.conversations.delete_requested.connect(s.delete_conversation)
        self.conversations.search_changed.connect(lambda _text: self.refresh_list())
        self.settings_panel.settings_changed.connect(s.update_settings)
        self.settings_panel.preset_saved.connect(lambda p: self.settings_panel.set_presets(s.save_preset(p)))
        self.settings_panel.preset_deleted.connect(lambda n: self.settings_panel.set_presets(s.delete_preset(n)))
        self.settings_panel.set_presets(s.store.list_presets())
        link_branches(self)  # ‹ 2/3 ›, Edit message, Branch to new chat, search hits
        link_folders(self)

    def _open_initial(self) -> None:
        allow_changes(self, self.session.store.problem)
        existing = self.session.list_conversations()
        if existing:
            self.session.open_conversation(existing[0].id)
            self.refresh_list()
        elif self.session.store.writable:
            self.session.new_conversation()

    @Slot()
    def _on_history_failed(self) -> None:
        """A write was refused while the window ran (the disk filled up): read-only from now on, saying why."""
        self.history_banner.show_state()
        allow_changes(self, self.session.store.problem)

    def _reopen_history(self) -> None:
        """The store opened its file again (recovered, or made writable): show it afresh."""
        self.session.close_conversation()
        self.chat.set_messages([])
        self.settings_panel.set_presets(self.session.store.list_presets())
        self._open_initial()
        self.refresh_list()

    # ------------------------------------------------------------ slots

    @Slot()
    def refresh_list(self) -> None:
        current = self.session.current.id if self.session.current else None
        query = self.conversations.search.text()
        self.conversations.set_conversations(self.session.list_conversations(query), current,
                                             self.session.folders.list(), searching=bool(query.strip()))
        if self.session.current:
            self.setWindowTitle(f"Tailor — {self.session.current.title}")

    def _on_opened(self, conversation: Conversation, messages: list[Message]) -> None:
        self.chat.set_messages(messages)
        editing = self.composer.editing_id
        if editing is not None and all(m.id != editing for m in messages) and not self._submitting:
            self.composer.set_editing(None)  # the text stays: the message it was to replace is not shown now
            self.statusBar().showMessage("Not editing any more: that message is not in the chat shown.", NOTICE_MS)
        self.settings_panel.set_settings(conversation.settings)
        self.setWindowTitle(f"Tailor — {conversation.title}")
        self.refresh_list()

    @Slot()
    def new_conversation(self) -> None:
        self.settings_panel.commit()  # pending edits belong to the conversation being left
        self.session.new_conversation()
        self.composer.setFocus()

    @Slot(int)
    def _select(self, conversation_id: int) -> None:
        self.settings_panel.commit()
        # Opened from a search: the branch holding the first hit is shown, and the hit marked (search_hit).
        self.session.open_conversation(conversation_id, find=self.conversations.search.text())

    def _on_memory(self, report: MemoryReport) -> None:
        if report.kv_tokens_total:
            self.memory_label.setText(f"KV cache {report.kv_tokens_used} / {report.kv_tokens_total} tokens")

    def _on_busy(self, busy: bool) -> None:
        """While a reply streams Stop takes the Send button's place; focus on the one goes to the other."""
        had_focus = self.send_stop.currentWidget().hasFocus()
        self.stop_button.setEnabled(busy)
        self.send_stop.setCurrentWidget(self.stop_button if busy else self.send_button)
        if had_focus:
            self.send_stop.currentWidget().setFocus()

    @Slot(str)
    def submit(self, text: str) -> None:
        """Send the composer's text (or the edited message, as its new version)."""
        self.settings_panel.commit()
        editing = self.composer.editing_id
        self._submitting = True  # the chat opens again on its new branch: that ends no edit
        try:
            if editing is not None:
                accepted = self.session.edit_message(editing, text)
            elif self.composer.editing:
                accepted = self.session.edit_last_user_message(text)
            else:
                accepted = self.session.send(text)
        finally:
            self._submitting = False
        if accepted:
            self.composer.clear()
            self.composer.set_editing(None)

    @Slot()
    def stop(self) -> None:
        if self.session.busy:
            self.session.stop()
        elif self.composer.editing:
            self.composer.set_editing(None)
            self.composer.clear()

    @Slot()
    def show_plan(self) -> PlanPage:
        """Show the plan of the loaded model (the side panel's Model plan tab): where the layers go, the forecast, why."""
        self.plan_page.show_plan(self.session.plan)
        return self.side_panel.show_tab(PLAN.key)

    @Slot()
    def show_models(self) -> ModelManager:
        """Open (or raise) the Models window: search the hub, download, the local library."""
        if self.model_manager is None:
            self.model_manager = ModelManager(self.session.load_model, parent=self)
        chat = self.settings_panel.settings()  # the repo page plans at the open chat's context and KV type
        self.model_manager.repo_page.set_plan_settings(chat.load.n_ctx, chat.load.auto_ctx_cap, chat.load.kv_type)
        self.model_manager.show()
        self.model_manager.raise_()
        self.model_manager.activateWindow()
        return self.model_manager

    @Slot()
    def show_welcome(self) -> FirstRunDialog:
        """Open (or raise) the welcome: this machine, the built-in model, a recommended download."""
        if self.welcome is None:
            self.welcome = FirstRunDialog(self)
            self.welcome.chat_requested.connect(self._chat_now)
            self.welcome.model_requested.connect(lambda repo_id: self.show_models().open_repo(repo_id))
        self.welcome.show()
        self.welcome.raise_()
        self.welcome.activateWindow()
        return self.welcome

    def _chat_now(self) -> None:
        self.activateWindow()
        self.composer.setFocus()

    def copy_last_reply(self) -> None:
        reply = self.session.last_reply()
        if reply:
            QGuiApplication.clipboard().setText(reply)
            self.statusBar().showMessage("Copied the last reply.", NOTICE_MS)

    @Slot()
    def edit_last_message(self) -> None:
        current = self.session.current
        mine = [m for m in self.session.store.list_messages(current.id) if m.role == "user"] if current else []
        if mine and not self.session.busy:
            self.composer.set_editing(mine[-1].content, mine[-1].id)

    @Slot(int)
    def edit_message(self, message_id: int) -> None:
        """Put one of your messages into the box; Enter sends it as its new version (a new branch from there)."""
        message = self.session.store.get_message(message_id)
        if self.session.busy:
            self.statusBar().showMessage(BUSY_HINT, NOTICE_MS)
        elif message is not None and message.role == "user":
            self.composer.set_editing(message.content, message.id)

    def _choose_model(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open a GGUF model", "", "GGUF models (*.gguf);;All files (*)"
        )
        if path:
            self.session.load_model(path)

    def _choose_model_folder(self) -> None:
        """A Hugging Face model folder (safetensors, dense or AWQ): the PyTorch engine runs it."""
        path = QFileDialog.getExistingDirectory(self, "Open a model folder (config.json, *.safetensors)")
        if path:
            self.session.load_model(path)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        self.settings_panel.commit()
        save_window(self, app_settings())
        self.memory_page.shutdown()
        if self.welcome is not None:
            self.welcome.close()
            self.welcome.jobs.wait()
        if self.model_manager is not None:
            self.model_manager.shutdown()
            self.model_manager.close()
        self.server_menu.shutdown()
        self.chat_transfer.shutdown()
        self.session.shutdown()
        super().closeEvent(event)
