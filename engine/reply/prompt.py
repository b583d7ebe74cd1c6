"""The prompt text of a chat from the model's own template, and of a pinned system prompt alone.

Every backend renders through here: a template that refuses system messages gets the system prompt
folded into the first user message, the same way for GGUF and model folders.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from engine.backend import BackendError
from engine.chat_template import REFUSED, ChatTemplate, ChatTemplateError
from engine.protocol import ChatMessage

log = logging.getLogger(__name__)


def render_chat(template: ChatTemplate | None, template_error: str | None, messages: Sequence[ChatMessage],
                tools: list[dict] | None = None, variables: dict[str, Any] | None = None) -> str:
    """The prompt text of a chat; BackendError "template" when the model has no usable template.

    A template that refuses system messages (Gemma 2's "System role not supported") gets the
    system prompt at the head of the first user message instead, as Ollama and LM Studio do: the
    window sends a default system prompt, and the chat must not fail for it. `tools` and
    `variables` go to the template as they are (shape.py decides them).
    """
    if template is None:
        raise BackendError("template", template_error or "The model has no usable chat template.")
    try:
        return template.render(list(messages), tools=tools, variables=variables)
    except ChatTemplateError as exc:
        folded = _system_folded(messages) if str(exc).startswith(REFUSED) else None
        if folded is not None:
            try:
                return template.render(folded, tools=tools, variables=variables)
            except ChatTemplateError:
                pass
        raise BackendError("template", str(exc)) from None


def _system_folded(messages: Sequence[ChatMessage]) -> list[ChatMessage] | None:
    """`messages` with the system messages joined onto the first user message; None if there is nothing to fold."""
    system = [m.content for m in messages if m.role == "system" and m.content]
    rest = [m for m in messages if m.role != "system"]
    first_user = next((i for i, m in enumerate(rest) if m.role == "user"), None)
    if not system or first_user is None:
        return None
    head = rest[first_user]
    rest[first_user] = ChatMessage("user", "\n\n".join([*system, head.content]))
    return rest


def render_pinned(template: ChatTemplate | None, system_prompt: str) -> str | None:
    """A pinned system prompt alone, as the start of a chat; None (logged) when it cannot be rendered."""
    if not system_prompt or template is None:
        return None
    try:
        return template.render([ChatMessage("system", system_prompt)], add_generation_prompt=False)
    except ChatTemplateError as exc:
        log.warning("a pinned system prompt was not prefilled: %s", exc)
        return None
