"""SessionTools: what a ChatSession does about tools: the tools a reply offers, and the user's answers.

A chat has tools on when its settings name MCP servers (`tool_servers`); a reply then offers the ready
servers' tools that fit the context (tool_set.py), if the model's template takes tools. The user's
"Always in this chat" is kept in the chat's settings (`allowed_tools`), "Always for this tool" in the
MCP configuration (the ToolHost's `allow_for_good`). A chat whose `tool_choice` is "required" makes each
reply's first request call a tool.
"""

from __future__ import annotations

from dataclasses import replace

from app.chat.listener import SessionListener
from app.chat.model_state import ModelState, not_running
from app.chat.replies import Replies
from app.chat.tool_permissions import Decision
from app.chat.tool_rounds import ToolHost
from app.chat.tool_set import ToolSet, fit_tools
from app.mcp.types import ServerStatus
from app.services.history.records import ToolChoice
from app.services.history.store import ChatSettings, ChatStore, Conversation
from engine.interface import EngineNotRunning
from engine.protocol import Error


class SessionTools:
    """Tools of a ChatSession (a base of it, which owns these attributes)."""

    store: ChatStore
    listener: SessionListener
    model: ModelState
    replies: Replies
    current: Conversation | None

    def _on_engine_died(self, event: Error) -> None:
        raise NotImplementedError

    def _start_reply(self, conversation_id: int) -> None:
        raise NotImplementedError

    def use_tools(self, host: ToolHost) -> None:
        """Let replies call tools (of the chat's MCP servers) through `host`."""
        self.replies.tool_host = host

    def set_tool_servers(self, names: tuple[str, ...]) -> None:
        """The open chat's MCP servers (none: tools off); they start now, so the next reply finds them ready."""
        if self.current is None:
            return
        self.current.settings = replace(self.current.settings, tool_servers=tuple(names))
        self.store.update_settings(self.current.id, self.current.settings)
        host = self.replies.tool_host
        if host is not None and names:
            host.servers.start(names)

    def set_tool_choice(self, choice: ToolChoice) -> None:
        """Whether the open chat's replies must call a tool first ("required") or may ("auto")."""
        if self.current is None or choice == self.current.settings.tool_choice:
            return
        self.current.settings = replace(self.current.settings, tool_choice=choice)
        self.store.update_settings(self.current.id, self.current.settings)

    def _tools_starting(self, settings: ChatSettings) -> bool:
        """Whether a reply with `settings` waits for its MCP servers: those not started are started now (the
        reply begins when each is ready or failed: `on_server_status`)."""
        host = self.replies.tool_host
        if host is None or not settings.tool_servers or not self.model.takes_tools:
            return False
        named = [st for st in host.servers.statuses() if st.name in settings.tool_servers]
        stopped = [st.name for st in named if st.state == "stopped"]
        if stopped:
            host.servers.start(stopped)
        waiting = [st.name for st in named if st.state in ("stopped", "starting")]
        if waiting:
            self.listener.notice(f"Starting tools: {', '.join(waiting)}…")
        return bool(waiting)

    def on_server_status(self, status: ServerStatus) -> None:
        """An MCP server started, failed or stopped: a reply that waited for it may begin."""
        pending = self.replies.pending
        if pending is not None and status.state != "starting":
            self._start_reply(pending)

    def _tools_for(self, settings: ChatSettings) -> ToolSet | None:
        """The tools a reply with `settings` offers: its MCP servers' that are ready and fit (None: none)."""
        host = self.replies.tool_host
        if host is None or not settings.tool_servers:
            return None
        if not self.model.takes_tools:
            self.listener.notice("This model's chat template takes no tools: the reply is written without them.")
            return None
        names = [s for s in settings.tool_servers if s in {st.name for st in host.servers.statuses()}]
        offered = host.servers.tools(names)
        waiting = [st.name for st in host.servers.statuses() if st.name in names and st.state != "ready"]
        if waiting:
            self.listener.notice(f"Tools of {', '.join(waiting)} are not ready: the reply is written without them.")
        tools = fit_tools(offered, self.model.n_ctx)
        if tools is not None and tools.left_out:
            self.listener.notice(tools.summary())
        return tools

    def answer_permission(self, call_id: str, decision: Decision) -> None:
        """The user's answer about a call of the streaming reply; "Always in this chat" is kept in its settings."""
        stream = self.replies.streaming_conversation
        try:
            allowed = self.replies.answer(call_id, decision)
        except EngineNotRunning as exc:  # the last call ended and the model could not go on
            self._on_engine_died(not_running(exc))
            return
        if allowed is None or stream is None:
            return
        conversation = self.store.get_conversation(stream)
        if conversation is not None and set(conversation.settings.allowed_tools) != allowed:
            settings = replace(conversation.settings, allowed_tools=tuple(sorted(allowed)))
            self.store.update_settings(stream, settings)
            if self.current is not None and self.current.id == stream:
                self.current.settings = settings
