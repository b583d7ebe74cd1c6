"""A template that refuses system messages (Gemma 2's) still chats: the system prompt leads the first user turn."""

from __future__ import annotations

import pytest

from engine.backend import BackendError
from engine.chat_template import ChatTemplate
from engine.protocol import ChatMessage
from engine.reply.prompt import render_chat
from tests.paths import CHAT_TEMPLATES

TEMPLATES = CHAT_TEMPLATES
SYSTEM = ChatMessage("system", "You are Tailor, a helpful assistant.")


def gemma2() -> ChatTemplate:
    return ChatTemplate((TEMPLATES / "google-gemma-2-2b-it.jinja").read_text(), bos_token="<bos>")


def test_gemma_2_gets_the_system_prompt_in_its_first_user_turn():
    chat = [SYSTEM, ChatMessage("user", "Hi!"), ChatMessage("assistant", "Hello."), ChatMessage("user", "Bye.")]
    prompt = render_chat(gemma2(), None, chat)
    assert prompt.startswith("<bos><start_of_turn>user\nYou are Tailor, a helpful assistant.\n\nHi!<end_of_turn>")
    assert prompt.count("<start_of_turn>user") == 2 and "system" not in prompt
    assert prompt.endswith("<start_of_turn>model\n")


def test_without_a_system_prompt_nothing_changes():
    chat = [ChatMessage("user", "Hi!")]
    assert render_chat(gemma2(), None, chat) == gemma2().render(chat)


def test_other_refusals_still_fail_with_the_template_s_words():
    # Roles that do not alternate are refused whatever the system prompt.
    with pytest.raises(BackendError, match="the chat template refused the conversation"):
        render_chat(gemma2(), None, [SYSTEM, ChatMessage("user", "a"), ChatMessage("user", "b")])


def test_a_template_that_takes_system_messages_gets_them_as_they_are():
    llama = ChatTemplate((TEMPLATES / "meta-llama-Llama-3.1-8B-Instruct.jinja").read_text())
    prompt = render_chat(llama, None, [SYSTEM, ChatMessage("user", "Hi!")])
    assert "<|start_header_id|>system<|end_header_id|>" in prompt and "You are Tailor" in prompt
