"""Tailor's server driven by the official `openai` client: chat and text completions, whole and streamed."""

from __future__ import annotations

import httpx
import openai

from app.server.runner import ServerThread
from tests.app.server.conftest import FRANCE, MODEL


def test_lists_the_loaded_model(client: openai.OpenAI):
    models = client.models.list().data
    assert [m.id for m in models] == [MODEL]


def test_chat_completion_answers_with_usage(client: openai.OpenAI):
    reply = client.chat.completions.create(model=MODEL, messages=FRANCE, max_tokens=24, temperature=0)
    assert reply.object == "chat.completion" and reply.id.startswith("chatcmpl-")
    choice = reply.choices[0]
    assert choice.message.role == "assistant" and "Paris" in choice.message.content
    assert choice.finish_reason in ("stop", "length")
    usage = reply.usage
    assert usage.prompt_tokens > 10 and 0 < usage.completion_tokens <= 24
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_streamed_chat_is_the_same_reply_in_chunks(client: openai.OpenAI):
    whole = client.chat.completions.create(model=MODEL, messages=FRANCE, max_tokens=24, temperature=0)
    stream = client.chat.completions.create(
        model=MODEL, messages=FRANCE, max_tokens=24, temperature=0, stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == [whole.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert len({c.id for c in chunks}) == 1


def test_stream_ends_with_done_line(server: ServerThread):
    body = {"model": MODEL, "messages": FRANCE, "max_tokens": 8, "stream": True}
    with httpx.stream("POST", f"{server.url}/chat/completions", json=body, timeout=60) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"


def test_text_completion_continues_the_prompt(client: openai.OpenAI):
    reply = client.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=8, temperature=0)
    assert reply.object == "text_completion"
    assert "Paris" in reply.choices[0].text
    assert reply.usage.prompt_tokens < 10  # no chat template around a raw prompt
    streamed = client.completions.create(
        model=MODEL, prompt="The capital of France is", max_tokens=8, temperature=0, stream=True
    )
    assert "".join(c.choices[0].text for c in streamed) == reply.choices[0].text


def test_stop_strings_and_max_tokens(client: openai.OpenAI):
    reply = client.completions.create(
        model=MODEL, prompt="1, 2, 3, 4, 5,", max_tokens=40, temperature=0, stop=[" 9"]
    )
    assert reply.choices[0].finish_reason == "stop"
    assert " 9" not in reply.choices[0].text and "8" in reply.choices[0].text
    short = client.completions.create(model=MODEL, prompt="1, 2, 3, 4, 5,", max_tokens=3, temperature=0)
    assert short.choices[0].finish_reason == "length" and short.usage.completion_tokens == 3


def test_seed_repeats_a_sampled_reply(client: openai.OpenAI):
    def ask(seed: int) -> str:
        reply = client.chat.completions.create(
            model=MODEL, messages=FRANCE, max_tokens=16, temperature=1.0, top_p=0.9, seed=seed
        )
        return reply.choices[0].message.content

    assert ask(7) == ask(7)
