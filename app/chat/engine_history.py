"""The conversation as the engine is sent it: the system prompt, then each message, a reply's tool steps
expanded into the turns the model wrote and read (an assistant turn with its calls, a tool turn per call)."""

from __future__ import annotations

from collections.abc import Iterable

from app.mcp.result_cut import for_model
from app.services.history.store import Message
from app.services.history.tool_steps import ToolStep
from engine.protocol import ChatMessage, ToolCall


def engine_messages(messages: Iterable[Message], system_prompt: str) -> list[ChatMessage]:
    """What the model reads for the branch `messages`: empty messages are left out (a reply that wrote
    nothing), a reply's steps come before its answer."""
    history = [ChatMessage("system", system_prompt)] if system_prompt.strip() else []
    for message in messages:
        for step in message.tool_steps:
            history.extend(step_messages(step))
        if message.content:
            history.append(ChatMessage(message.role, message.content))
    return history


def step_messages(step: ToolStep) -> list[ChatMessage]:
    """One tool step as turns: what the model wrote with its calls, then each call's result (in the calls'
    order, which is the order the model gave them), its first 64 KiB: the card keeps the whole."""
    calls = tuple(ToolCall(c.id, c.name, c.arguments) for c in step.calls)
    turns = [ChatMessage("assistant", step.text, tool_calls=calls)]
    turns.extend(ChatMessage("tool", for_model(c.result), tool_call_id=c.id, name=c.name) for c in step.calls)
    return turns
