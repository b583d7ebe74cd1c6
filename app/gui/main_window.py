"""MainWindow: conversations on the left, the chat in the middle, one side panel with tabs on the right
(chat settings, memory and performance, the model plan; it collapses to an icon rail).

The window is the composition root of app/gui: it builds each feature with what that feature needs (the
session, the controller, the widgets it works on) and wires them in one place, `_connect_signals`. No
feature knows the window: each offers signals and slots, and the window connects them.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Slot
from PySide6.QtGui import QAction, QCloseEvent, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QMainWindow

from app.chat.model_state import file_name
from app.gui.banners.history_banner import HistoryBanner
from app.gui.banners.problem_banner import Banner
from app.gui.chat_controller import ChatController
from app.gui.chat_list.conversation_list import ConversationList
from app.gui.common.app_settings import app_settings
from app.gui.common.plan_view import PlanLabel, PlanPage
from app.gui.common.status_labels import FittingLabel
from app.gui.composer.context_prompt import ContextPrompt
from app.gui.composer.media_attach import SHORTCUT as ATTACH_SHORTCUT
from app.gui.composer.media_attach import MediaAttach
from app.gui.composer.message_box import Composer
from app.gui.composer.send_stop import SendStop
from app.gui.composer.sending import Sending
from app.gui.dialogs.help_menu import HelpMenu
from app.gui.dialogs.preferences import new_chat_defaults, preferences_action
from app.gui.documents.knowledge import SHORTCUT as KNOWLEDGE_SHORTCUT
from app.gui.documents.knowledge import KnowledgeButton, KnowledgeDialog
from app.gui.model_picker.picker import ModelPicker
from app.gui.model_picker.picker_list import hearing_models, vision_models
from app.gui.models_window.manager_window import ModelManager
from app.gui.server.menu import REMOTE_MEMORY, ServerMenu
from app.gui.side_panel.memory.page import MemoryPage
from app.gui.side_panel.settings.panel import PANEL_FIELDS, SettingsPanel
from app.gui.tools.mcp_tools import McpTools
from app.gui.tools.permission_bar import PermissionBar
from app.gui.tools.tools_button import ToolsButton
from app.gui.transcript.view import ChatView
from app.gui.transfer.chat_transfer import ChatTransfer
from app.gui.window_geometry import restore_window, save_window
from app.gui.window_layout import (
    PLAN,
    LayoutState,
    ViewMenu,
    chat_column,
    chat_header,
    main_splitter,
    readable_chat,
    side_panel,
)
from app.mcp.config import McpConfig, default_keys
from app.services.documents.embedder import embedding_models
from app.services.documents.semantic import QuestionEmbedders
from app.services.history.store import Conversation, HistoryProblem, Message
from app.services.paths import AppPaths
from engine.protocol import MemoryReport
from models.library import ModelStore

NOTICE_MS = 8000
COPIED_MS = 3000


class MainWindow(QMainWindow):
    """The Tailor window.

    Args:
        controller: the chat logic (store and engine).
    """

    def __init__(self, controller: ChatController):
        super().__init__()
        self.controller = controller  # its signals: what the chat says
        self.session = controller.session  # its methods: what the user does
        self.setWindowTitle("Tailor")
        self._build_parts()
        self._build_layout()
        self._build_actions()
        self._build_status_bar()
        self._build_features()
        self._connect_signals()
        self.settings_panel.set_model_path(self.session.model_path)
        self.settings_panel.set_presets(self.session.store.list_presets())
        self._open_initial()
        # Images of chats deleted within the store's grace period last time (app/services/media/store.py).
        self.session.store.collect_media()
        restore_window(self, self.layout_state, app_settings())  # its size, splitter and side panel as last closed
        self.composer.setFocus()

    # ------------------------------------------------------------ building

    def _build_parts(self) -> None:
        """The chat list, the transcript, the message box and its Send/Stop, the chat settings, the banners."""
        self.conversations = ConversationList()
        self.chat = ChatView()
        self.chat.use_media_store(self.session.store.media)  # the messages' images, shown as thumbnails
        self.composer = Composer()
        self.settings_panel = SettingsPanel()
        self.banner = Banner()
        self.history_banner = HistoryBanner(self.session.store, self)  # the history read-only, full or damaged
        self.send_stop = SendStop()  # Send, or Stop while a reply streams
        self.tools_button = ToolsButton()  # which MCP servers' tools the chat may call
        self.permission_bar = PermissionBar(self.composer)  # asks before a tool call runs
        # Images and audio for the next message (Attach, drop, paste); which library models see (or hear), when
        # this one cannot.
        store = ModelStore(AppPaths.default().data_dir)
        model = self.session.model
        self.media_attach = MediaAttach(
            self.composer, lambda: model.sees_images if model.loaded else None, lambda: file_name(model.path),
            lambda: vision_models(store), self, hears=lambda: model.hears_audio if model.loaded else None,
            hearing_models=lambda: hearing_models(store), media_store=self.session.store.media)
        # What the box sends: a message, or one of yours again as its new version (pending settings saved first).
        data_dir = AppPaths.default().data_dir
        self.sending = Sending(self.session, self.composer, self.settings_panel.commit, self.media_attach.strip,
                               parent=self, data_dir=data_dir,
                               questions=QuestionEmbedders(lambda: embedding_models(ModelStore(data_dir))))
        self.knowledge_button = KnowledgeButton()  # the knowledge index the chat answers from

    def _build_layout(self) -> None:
        """The splitter: the chat list | the chat column | the side panel (window_layout.py); the model picker
        at the top of the chat column."""
        self.chat_header, self.chat_header_layout = chat_header()  # the model picker's row
        self.readable = readable_chat(self.chat, self.composer, self.send_stop, tools=self.tools_button,
                                      attach=self.media_attach.button, knowledge=self.knowledge_button,
                                      above_composer=(self.media_attach.strip, self.permission_bar))
        self.chat_column = chat_column(self.chat_header, self.history_banner, self.banner, readable=self.readable)
        self.memory_page = MemoryPage(self.controller, self.session.plan)
        self.plan_page = PlanPage()
        self.plan_page.show_plan(self.session.plan)
        self.side_panel = side_panel(self.settings_panel, self.memory_page, self.plan_page)
        self.splitter = main_splitter(self.conversations, self.chat_column, self.side_panel)
        self.layout_state = LayoutState(self.splitter, self.side_panel)
        self.setCentralWidget(self.splitter)
        # The loaded model, switching, load progress with Cancel. Made once the splitter is in the window, with
        # the window as its parent: Tab reaches it after the side panel.
        self.model_picker = ModelPicker(self.controller, ModelStore(AppPaths.default().data_dir), parent=self)
        self.chat_header_layout.addWidget(self.model_picker, 1)
        self.model_picker.refresh_models()

    def _action(self, text: str, shortcut: QKeySequence | str, slot: object) -> QAction:
        action = QAction(text, self, shortcut=QKeySequence(shortcut))
        action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        action.triggered.connect(slot)
        self.addAction(action)
        return action

    def _build_actions(self) -> None:
        """The Chat, View and Help menus, with their shortcuts."""
        self.new_action = self._action("New chat", "Ctrl+N", self.new_conversation)
        self.stop_action = self._action("Stop", "Esc", self.sending.stop)
        self.regenerate_action = self._action("Regenerate", "Ctrl+R", self.session.regenerate)
        self.copy_action = self._action("Copy last reply", "Ctrl+Shift+C", self.copy_last_reply)
        self.focus_action = self._action("Focus message box", "Ctrl+L", self.composer.setFocus)
        self.edit_action = self._action("Edit last message", "Ctrl+E", self.sending.edit_last_message)
        self.attach_action = self._action("Attach images, audio or documents…", ATTACH_SHORTCUT, self.media_attach.choose)
        self.knowledge_action = self._action("Knowledge…", KNOWLEDGE_SHORTCUT, self.show_knowledge)
        self.open_action = self._action("Open model…", "Ctrl+O", self.model_picker.choose_file)
        self.open_folder_action = self._action("Open model folder…", "Ctrl+Shift+O", self.model_picker.choose_folder)
        self.plan_action = self._action("Model plan…", "Ctrl+I", self.show_plan)
        self.models_action = self._action("Models…", "Ctrl+M", self.show_models)
        self.model_manager: ModelManager | None = None
        self.chat_menu = self.menuBar().addMenu("&Chat")
        self.chat_menu.addActions([self.new_action, self.open_action, self.open_folder_action, self.plan_action,
                                   self.models_action])
        self.chat_menu.addSeparator()
        self.chat_menu.addActions([self.stop_action, self.regenerate_action, self.edit_action, self.attach_action,
                                   self.knowledge_action, self.copy_action])
        self.help_menu = HelpMenu(self)  # Welcome…, Open log folder
        self.menuBar().addMenu(self.help_menu)
        # View: the side panel's tabs (Ctrl+Shift+M: memory; Ctrl+I: the plan), and the panel itself (Ctrl+B).
        self.view_menu = ViewMenu(self.side_panel, self.plan_action, self)
        self.menuBar().insertMenu(self.help_menu.menuAction(), self.view_menu)

    def _build_status_bar(self) -> None:
        # Each shortens itself to whole parts or words that fit, the full text in its tooltip.
        self.model_label = FittingLabel("No model")
        self.stats_label = FittingLabel("")
        self.memory_label = FittingLabel("")
        self.plan_label = PlanLabel("")
        self.statusBar().addWidget(self.model_label, 1)
        self.statusBar().addWidget(self.plan_label, 1)
        self.statusBar().addPermanentWidget(self.stats_label)
        self.statusBar().addPermanentWidget(self.memory_label)

    def _build_features(self) -> None:
        """The context question, the Server menu, Export and Import, Preferences."""
        # Asks before a chat that outgrows its context is sent.
        self.context_prompt = ContextPrompt(self.session, self.composer, self, self.media_attach.strip)
        # Serve the loaded model; chat with a remote server.
        self.server_menu = ServerMenu(self.controller, self)
        self.menuBar().addMenu(self.server_menu.menu)
        self.statusBar().addPermanentWidget(self.server_menu.toggle.label)
        # Chat → Export… and Import…
        self.chat_transfer = ChatTransfer(self.session, self)
        self.statusBar().addPermanentWidget(self.chat_transfer.progress)
        self._add_to_chat_menu(self.chat_transfer.export_action, self.chat_transfer.import_action)
        # Chat → Preferences… (Ctrl+,); new chats take its defaults (ChatSession.new_conversation asks).
        preferences = app_settings()
        self.preferences_action = preferences_action(self, preferences)
        self._add_to_chat_menu(self.preferences_action)
        self.session.new_chat_settings = lambda base: new_chat_defaults(preferences, base)
        # MCP servers: their tools for the chat, the servers dialog (Chat → MCP servers…).
        paths = AppPaths.default()
        self.mcp = McpTools(McpConfig(paths.mcp_config, default_keys(paths.mcp_secrets)), self.controller.deliver,
                            paths.log_dir, self.session.use_tools, self)
        self.mcp_action = self._action("MCP servers…", "Ctrl+Shift+T", lambda: self.mcp.show_dialog(self))
        self.chat_menu.insertAction(self.preferences_action, self.mcp_action)

    def _add_to_chat_menu(self, *actions: QAction) -> None:
        """After a separator; their shortcuts work anywhere in the window."""
        self.addActions(list(actions))
        self.chat_menu.addSeparator()
        self.chat_menu.addActions(list(actions))

    # ------------------------------------------------------------ wiring

    def _connect_signals(self) -> None:
        """Every wire of the window, in one place: what the chat says goes to the parts that show it; what the
        user asks of them goes to the session, or to the window's slots below."""
        self._connect_chat()
        self._connect_requests()
        self._connect_features()

    def _connect_chat(self) -> None:
        """What the chat says (the controller's signals) to the chat list, the transcript, the side panel, the
        banners and the status bar."""
        c, s, view = self.controller, self.session, self.chat
        c.conversations_changed.connect(self.refresh_list)
        c.conversation_opened.connect(self._on_opened)
        c.message_added.connect(view.append_message)
        c.stream_started.connect(view.begin_stream)
        c.stream_text.connect(view.append_stream)
        c.stream_reasoning.connect(view.append_reasoning)
        c.stream_finished.connect(view.end_stream)
        c.busy_changed.connect(self.send_stop.set_busy)
        c.model_changed.connect(self.model_label.setText)
        # Every model switch (and a failed load that goes back to the last good one) says so here.
        c.model_changed.connect(lambda _text: self.settings_panel.set_model_path(s.model_path))
        c.context_loaded.connect(self.settings_panel.show_loaded_context)
        c.loaded.connect(lambda event: self.settings_panel.show_model_info(event.info))
        c.stats_changed.connect(self.stats_label.setText)  # its tooltip is the whole line
        c.notice.connect(self._say)
        c.problem.connect(self.banner.show_problem)
        c.problem_cleared.connect(self.banner.hide)
        c.history_failed.connect(self._on_history_failed)
        c.memory.connect(self._on_memory)
        c.planned.connect(self.plan_page.show_plan)
        c.planned.connect(self.plan_label.show_plan)
        c.versions_changed.connect(view.set_versions)  # ‹ 2/3 ›
        c.search_hit.connect(view.show_hit)  # the words a chat was opened for, marked
        c.busy_changed.connect(view.set_busy)
        c.tool_step.connect(view.on_tool_step)
        c.tool_call_changed.connect(view.on_tool_call_changed)
        c.tool_permission_asked.connect(self.permission_bar.ask)

    def _connect_requests(self) -> None:
        """What the user asks of the message box, the transcript, the chat list, the chat settings and the
        banners: to the session (pins and folders: its ChatFolders), or to the window's slots."""
        s, view, chats, panel = self.session, self.chat, self.conversations, self.settings_panel
        self.composer.submitted.connect(self.sending.submit)
        self.send_stop.send_button.clicked.connect(lambda: self.sending.submit(self.composer.toPlainText()))
        self.send_stop.stop_button.clicked.connect(self.sending.stop)
        self.sending.notice.connect(self._say)
        self.media_attach.notice.connect(self._say)
        view.version_requested.connect(s.show_version)
        view.edit_requested.connect(self.sending.edit_message)
        view.branch_requested.connect(s.branch_to_new_chat)
        view.regenerate_requested.connect(s.regenerate)
        view.copied.connect(lambda text: self._say(text, COPIED_MS))
        view.file_missing.connect(self._say)
        chats.selected.connect(self._select)
        chats.new_requested.connect(self.new_conversation)
        chats.rename_requested.connect(s.rename_conversation)
        chats.delete_requested.connect(s.delete_conversation)
        chats.search_changed.connect(lambda _text: self.refresh_list())
        chats.pin_requested.connect(s.folders.pin)
        chats.move_requested.connect(s.folders.move)
        chats.folder_delete_requested.connect(s.folders.delete)
        chats.folder_create_requested.connect(self._create_folder)
        chats.folder_rename_requested.connect(self._rename_folder)
        panel.settings_changed.connect(lambda edited: s.update_settings(edited, PANEL_FIELDS))
        panel.preset_saved.connect(lambda p: panel.set_presets(s.save_preset(p)))
        panel.preset_deleted.connect(lambda n: panel.set_presets(s.delete_preset(n)))
        self.banner.reload_button.clicked.connect(s.reload_engine)
        self.history_banner.reopened.connect(self._reopen_history)

    def _connect_features(self) -> None:
        """The model picker, the context question, the Server menu, Export and Import, the welcome."""
        c = self.controller
        self.model_picker.more_requested.connect(self.show_models)
        c.context_outgrown.connect(self.context_prompt.ask)
        self.context_prompt.settings_changed.connect(self.settings_panel.set_settings)
        self.context_prompt.new_chat_requested.connect(self.new_conversation)
        self.server_menu.notice.connect(self._say)
        self.server_menu.remote_status.connect(lambda _status: self.memory_label.setText(REMOTE_MEMORY))
        self.server_menu.remote_status.connect(self.memory_page.show_remote)
        self.server_menu.local_status.connect(lambda: self.memory_label.setText(""))
        # What the server loaded besides the chat's model, as parts of the memory panel.
        self.server_menu.toggle.models_changed.connect(self.memory_page.memory.show_server_models)
        c.memory.connect(self.server_menu.show_memory)  # after _on_memory: while remote, "Memory: remote" stays
        self.chat_transfer.notice.connect(self._say)
        self.chat_transfer.chats_changed.connect(self.refresh_list)
        self.permission_bar.answered.connect(self.session.answer_permission)
        self.mcp.status.connect(self.tools_button.update_status)
        self.mcp.status.connect(self.session.on_server_status)
        self.mcp.notice.connect(self._say)
        self.tools_button.set_statuses(self.mcp.statuses())
        self.tools_button.servers_chosen.connect(self.session.set_tool_servers)
        self.tools_button.tool_choice_chosen.connect(self.session.set_tool_choice)
        self.tools_button.manage_requested.connect(lambda: self.mcp.show_dialog(self))
        self.knowledge_button.clicked.connect(self.show_knowledge)
        self.help_menu.chat_requested.connect(self._chat_now)
        self.help_menu.model_requested.connect(lambda repo_id: self.show_models().open_repo(repo_id))

    def _open_initial(self) -> None:
        self._allow_changes(self.session.store.problem)
        existing = self.session.list_conversations()
        if existing:
            self.session.open_conversation(existing[0].id)
            self.refresh_list()
        elif self.session.store.writable:
            self.session.new_conversation()

    def _allow_changes(self, problem: HistoryProblem | None) -> None:
        """Turn sending and every other change of the history off (with the reason) or back on."""
        allowed = problem is None
        self.conversations.set_editable(allowed)
        self.settings_panel.setEnabled(allowed)
        self.send_stop.send_button.setEnabled(allowed)
        self.media_attach.button.setEnabled(allowed)
        for action in (self.new_action, self.regenerate_action, self.edit_action, self.attach_action):
            action.setEnabled(allowed)
        self.composer.setEnabled(allowed)
        if allowed:
            self.send_stop.send_button.setToolTip("")
            self.composer.set_editing(None)  # its own placeholder again
        else:
            reason = f"Sending is off: {problem.reason}."
            self.send_stop.send_button.setToolTip(reason)
            self.composer.setPlaceholderText(reason)

    @Slot()
    def _on_history_failed(self) -> None:
        """A write was refused while the window ran (the disk filled up): read-only from now on, saying why."""
        self.history_banner.show_state()
        self._allow_changes(self.session.store.problem)

    def _reopen_history(self) -> None:
        """The store opened its file again (recovered, or made writable): show it afresh."""
        self.session.close_conversation()
        self.chat.set_messages([])
        self.settings_panel.set_presets(self.session.store.list_presets())
        self._open_initial()
        self.refresh_list()

    # ------------------------------------------------------------ slots

    def _say(self, text: str, ms: int = NOTICE_MS) -> None:
        """A notice in the status bar, for `ms` milliseconds."""
        self.statusBar().showMessage(text, ms)

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
        self.sending.chat_shown(messages)  # an edit of a message not shown now ends
        self.settings_panel.set_settings(conversation.settings)
        self.tools_button.show_choice(conversation.settings.tool_servers, conversation.settings.tool_choice)
        self.knowledge_button.show_choice(conversation.settings.knowledge)
        self.setWindowTitle(f"Tailor — {conversation.title}")
        self.refresh_list()

    @Slot()
    def show_knowledge(self) -> KnowledgeDialog:
        """The knowledge indexes: choose the open chat's, or index a folder (app/gui/documents/knowledge.py)."""
        current = self.session.current.settings.knowledge if self.session.current else None
        data_dir = AppPaths.default().data_dir
        dialog = KnowledgeDialog(data_dir, current, self, embedding_models=lambda: embedding_models(ModelStore(data_dir)))
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.chosen.connect(self._knowledge_chosen)
        dialog.open()
        return dialog

    def _knowledge_chosen(self, name: str | None) -> None:
        if self.session.current is None:
            self.session.new_conversation()
        self.session.set_knowledge(name)
        self.knowledge_button.show_choice(name)
        self._say(f"This chat answers from “{name}”." if name else "This chat answers from no knowledge.")

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

    def _create_folder(self, name: str, move_chat: int | None) -> None:
        folder = self.session.folders.create(name)
        if folder is not None and move_chat is not None:
            self.session.folders.move(move_chat, folder.id)

    def _rename_folder(self, folder_id: int, name: str) -> None:
        if not self.session.folders.rename(folder_id, name):
            self.refresh_list()  # the name was refused (the status bar says why): the old one again

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

    @Slot(str)
    def submit(self, text: str) -> None:
        """Send `text` as if typed in the box and sent (or, while editing, as the edited message's new version)."""
        self.sending.submit(text)

    def _chat_now(self) -> None:
        self.activateWindow()
        self.composer.setFocus()

    def copy_last_reply(self) -> None:
        reply = self.session.last_reply()
        if reply:
            QGuiApplication.clipboard().setText(reply)
            self._say("Copied the last reply.")

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        self.settings_panel.commit()
        save_window(self, self.layout_state, app_settings())
        self.memory_page.shutdown()
        self.help_menu.shutdown()
        if self.model_manager is not None:
            self.model_manager.shutdown()
            self.model_manager.close()
        self.server_menu.shutdown()
        self.chat_transfer.shutdown()
        self.sending.shutdown()
        self.session.shutdown()
        self.mcp.close()
        super().closeEvent(event)
