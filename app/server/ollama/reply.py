"""One reply of /api/chat or /api/generate in Ollama's shapes: NDJSON lines as the tokens come, or one
object; the last (done: true) with done_reason and the engine's figures in nanoseconds."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from app.server.errors import ApiError, from_engine
from app.server.ollama.describe import now
from app.server.ollama.messages import ollama_tool_call
from app.server.ollama.ndjson import ndjson_line
from engine.protocol import Done, Error, Event, Token

_DONE_REASON = {"stop": "stop", "length": "length", "tool_calls": "stop", "cancelled": "stop"}


def figures(done: Done, started_ns: int, load_ns: int) -> dict[str, int]:
    """Ollama's counts and durations (ns) from the engine's stats: the prompt's evaluation is the time to
    the first token, and eval_duration is the decode time at the rate the engine measured, over every
    generated token (so eval_count / eval_duration is that rate)."""
    stats = done.stats
    eval_ns = round(stats.gen_tokens / stats.decode_tok_s * 1e9) if stats.decode_tok_s > 0 else 0
    return {"total_duration": time.monotonic_ns() - started_ns, "load_duration": load_ns,
            "prompt_eval_count": stats.prompt_tokens or 0, "prompt_eval_duration": round(stats.ttft_s * 1e9),
            "eval_count": stats.gen_tokens, "eval_duration": eval_ns}


class OllamaReply:
    """Args:
        name: the model as the client named it (Ollama echoes it).
        chat: /api/chat (a `message`) rather than /api/generate (a `response`).
        started_ns: time.monotonic_ns() when the request came in.
        load_ns: how long the model took to be lent (loaded, where it was not).
    """

    def __init__(self, name: str, chat: bool, started_ns: int, load_ns: int):
        self.name, self.chat, self.started_ns, self.load_ns = name, chat, started_ns, load_ns

    def _part(self, text: str, thinking: str = "", calls: list[dict] | None = None, done: bool = False
              ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.name, "created_at": now()}
        if self.chat:
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if thinking:
                message["thinking"] = thinking
            if calls:
                message["tool_calls"] = calls
            body["message"] = message
        else:
            body["response"] = text
            if thinking:
                body["thinking"] = thinking
        body["done"] = done
        return body

    def _final(self, done: Done, text: str = "", thinking: str = "", calls: list[dict] | None = None
               ) -> dict[str, Any]:
        body = self._part(text, thinking, calls, done=True)
        body["done_reason"] = _DONE_REASON.get(done.finish_reason, "stop")
        body.update(figures(done, self.started_ns, self.load_ns))
        return body

    async def collect(self, first: Event, events: AsyncIterator[Event]) -> dict[str, Any] | ApiError:
        event = first
        while not isinstance(event, Done | Error):
            event = await anext(events)
        if isinstance(event, Error):
            return from_engine(event)
        calls = [ollama_tool_call(c, i) for i, c in enumerate(event.tool_calls)]
        return self._final(event, event.text, event.reasoning, calls)

    async def stream(self, first: Event, events: AsyncIterator[Event]) -> AsyncIterator[bytes]:
        try:
            event: Event | None = first
            while event is not None:
                if isinstance(event, Token):
                    yield ndjson_line(self._part("", event.text) if event.reasoning else self._part(event.text))
                elif isinstance(event, Done):
                    if event.tool_calls:  # as Ollama sends them: whole, in a line before the last
                        calls = [ollama_tool_call(c, i) for i, c in enumerate(event.tool_calls)]
                        yield ndjson_line(self._part("", calls=calls))
                    yield ndjson_line(self._final(event))
                    break
                elif isinstance(event, Error):  # the reply started, so the status is sent already
                    yield ndjson_line({"error": from_engine(event).message})
                    break
                event = await anext(events, None)
        finally:  # closed early (the client left): the engine's reply is cancelled at once
            await events.aclose()  # type: ignore[attr-defined]
