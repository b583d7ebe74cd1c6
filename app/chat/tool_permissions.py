"""Whether a tool call may run: the user's answers, and the question the window (or the terminal) asks.

A call runs without a question when its tool was allowed for good (the server's `always_allow`, kept in
the MCP configuration) or for this chat (the chat's `allowed_tools`, kept in its settings); otherwise the
user is asked, with the arguments in full. "Allow once" allows that call alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from app.services.history.tool_steps import ToolCallRecord

# once: this call; chat: this tool, in this chat, from now on; tool: this tool everywhere, for good; deny.
Decision = Literal["once", "chat", "tool", "deny"]
DECISIONS: tuple[str, ...] = ("once", "chat", "tool", "deny")


@dataclass(slots=True, frozen=True)
class PermissionAsk:
    """A call waiting for the user's answer: the call (its arguments as the model wrote them), the tool's
    description, and where it is (the chat and the reply)."""

    call: ToolCallRecord
    description: str
    conversation_id: int
    message_id: int
