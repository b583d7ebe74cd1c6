"""RemoteChat: one chat reply from an OpenAI-compatible server, as Tailor's engine events.

Streams with httpx; the server's failures become one RemoteError with a message a user can
act on: unreachable, timed out, an HTTP error (with the server's own error text), a stream
that is not OpenAI's format. The server is someone else's, so nothing it sends is read without
a limit: error answers (MAX_ERROR_BODY), events (MAX_EVENT_BYTES), tokens (`max_tokens`, held
by ReplyGuard) and the time between tokens (`idle_timeout_s`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from app.remote.bounded_http import MAX_ERROR_BODY, MAX_JSON_BODY, Capped, interrupt, read_capped, size_text
from app.remote.chat_request import chat_body, wants_calls
from app.remote.reply_guard import IDLE_TIMEOUT_S, TAIL_EVENTS, TAIL_S, IdleStream, ReplyGuard
from app.remote.reply_tally import ReplyCounts, ReplyTally
from app.remote.sse_reader import MalformedStream, read_events
from app.remote.tool_call_tally import ToolCallLimit, ToolCallTally
from engine.protocol import (
    ChatMessage,
    Error,
    Event,
    FinishReason,
    ReplyShape,
    SamplingParams,
    Token,
)

CONNECT_TIMEOUT_S = 10.0
# Longest silence between two pieces of a reply (a big prompt's prefill on a busy server included).
READ_TIMEOUT_S = 120.0
MAX_DETAIL = 300  # characters of a server's error text in our one-line message


class RemoteError(Exception):
    """A remote server failed; the message says which and how."""


@dataclass(slots=True, frozen=True)
class RemoteEndpoint:
    """An OpenAI-compatible server: its base URL (ending in /v1), the model to ask for, the key."""

    url: str
    model: str
    api_key: str | None = None
    read_timeout_s: float = READ_TIMEOUT_S
    # Longest time without a token while the server still sends something (keep-alives, empty events).
    idle_timeout_s: float = IDLE_TIMEOUT_S

    @property
    def base(self) -> str:
        return self.url.rstrip("/")


def normalize_url(url: str) -> str:
    """`host:port`, `http://host:port` or `.../v1` all become `http(s)://host:port/.../v1`."""
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    if not url.startswith(("http://", "https://")):
        raise RemoteError(f"{url} is not an http:// or https:// address.")
    return url if url.endswith("/v1") else url + "/v1"


class RemoteChat:
    """Talks to one endpoint; safe to use from several threads (one httpx client, pooled)."""

    def __init__(self, endpoint: RemoteEndpoint, transport: httpx.BaseTransport | None = None):
        self.endpoint = endpoint
        # Uncompressed answers: the caps count the bytes that are read, which a compressed body
        # could multiply a thousandfold before any cap saw them.
        headers = {"Accept-Encoding": "identity"}
        if endpoint.api_key:
            headers["Authorization"] = f"Bearer {endpoint.api_key}"
        timeout = httpx.Timeout(endpoint.read_timeout_s, connect=CONNECT_TIMEOUT_S)
        self._http = httpx.Client(headers=headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def models(self) -> list[str]:
        """The model ids the server lists."""
        body = self._get_json("/models")
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise RemoteError(f"{self.endpoint.base}/models did not answer with a model list.")
        return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]

    def stream(
        self,
        request_id: int,
        messages: Sequence[ChatMessage],
        sampling: SamplingParams,
        cancelled: Callable[[], bool] = lambda: False,
        on_response: Callable[[httpx.Response], None] | None = None,
        effort: str | None = None,
        shape: ReplyShape | None = None,
    ) -> Iterator[Event]:
        """Token events, then one Done (or an Error with kind "remote").

        Stops early when `cancelled()`; `on_response` gets the open response, so a canceller on
        another thread can interrupt it while the server is still silent (a long prefill).
        At `sampling.max_tokens` tokens the reply ends as length-limited whatever the server
        does (see ReplyGuard). `effort`: the server's reasoning_effort (none: its default).
        `shape`: its tools go to the server; the calls that come back end in the Done (see ToolCallTally).
        """
        body = chat_body(self.endpoint.model, messages, sampling, effort, shape)  # (BadTools: the caller's tools)
        tally = ReplyTally(request_id, ToolCallTally() if wants_calls(body) else None)
        finish: FinishReason = "length"
        usage = _Usage()
        guard = ReplyGuard(sampling.max_tokens, self.endpoint.idle_timeout_s)
        cut = False  # the guard ended the reply: the server's figures, if any, are not of what we kept
        tail: threading.Timer | None = None
        try:
            with self._http.stream("POST", f"{self.endpoint.base}/chat/completions", json=body) as response:
                if response.status_code >= 400:
                    raise RemoteError(self._http_error(response))
                if on_response is not None:
                    on_response(response)
                tail_events = 0
                for event in read_events(guard.watch(response.iter_bytes())):
                    if "error" in event:
                        raise RemoteError(f"{self._where()} failed mid-reply: {_error_text(event)}")
                    usage = _Usage.of(event) or usage
                    tokens, cut, reason = _take_choices(event, tally, guard)
                    yield from tokens
                    finish = reason or finish
                    if cut:
                        break
                    if guard.full:  # read what a correct server sends after its last token, briefly
                        tail, tail_events = tail or _interrupt_later(response), tail_events + 1
                        if tail_events > TAIL_EVENTS:
                            break
                    if cancelled():
                        finish = "cancelled"
                        break
                if finish == "stop":
                    tally.take_calls()
        except (RemoteError, MalformedStream, IdleStream, ToolCallLimit, httpx.HTTPError, httpx.StreamError) as exc:
            if cancelled():  # the canceller interrupted the response: a cancelled reply
                finish = "cancelled"
            elif not guard.full or isinstance(exc, ToolCallLimit):  # (a full reply's tail may fail, not its calls)
                yield Error("remote", self._stream_error(exc), request_id)
                return
        finally:
            if tail is not None:  # should it still fire, a pooled connection it shut down is seen closed, not reused
                tail.cancel()
        yield tally.done(finish, usage.counts(guard.tokens, cut))

    # ------------------------------------------------------------ errors in words

    def _where(self) -> str:
        return f"The server at {self.endpoint.base}"

    def _get_json(self, path: str) -> Any:
        """GET a JSON answer of at most MAX_JSON_BODY bytes."""
        try:
            with self._http.stream("GET", f"{self.endpoint.base}{path}") as response:
                if response.status_code >= 400:
                    raise RemoteError(self._http_error(response))
                body = read_capped(response.iter_bytes(), MAX_JSON_BODY, self.endpoint.read_timeout_s)
        except httpx.HTTPError as exc:
            raise RemoteError(self._transport_error(exc)) from None
        if body.cut == "size":
            raise RemoteError(f"{self._where()} answered {path} with more than {size_text(MAX_JSON_BODY)}.")
        if body.cut == "time":
            raise RemoteError(
                f"{self._where()} answered {path} too slowly: {body.pace()}; the rest was not read.")
        try:
            return json.loads(body.data)
        except (ValueError, RecursionError):
            raise RemoteError(f"{self._where()} did not answer with JSON.") from None

    def _http_error(self, response: httpx.Response) -> str:
        """The status and the server's own message, from at most MAX_ERROR_BODY bytes of its answer."""
        try:
            body = read_capped(response.iter_bytes(), MAX_ERROR_BODY, self.endpoint.read_timeout_s)
        except httpx.HTTPError:
            body = Capped(b"", 0.0)  # the status says enough
        try:
            detail = _error_text(json.loads(body.data))
        except (ValueError, RecursionError):
            detail = body.data.decode("utf-8", errors="replace").strip() or response.reason_phrase
        detail = detail[:MAX_DETAIL]  # a page of HTML says no more than its first lines
        if body.cut == "size":
            detail += f" (its answer went on past {size_text(MAX_ERROR_BODY)}; the rest was not read)"
        elif body.cut == "time":
            detail += f" (its error reply came too slowly: {body.pace()}; the rest was not read)"
        hint = {401: " (check the API key)", 403: " (not allowed)", 404: " (check the address and model name)"}
        return f"{self._where()} answered {response.status_code}{hint.get(response.status_code, '')}: {detail}"

    def _stream_error(self, exc: Exception) -> str:
        if isinstance(exc, RemoteError):
            return str(exc)
        if isinstance(exc, MalformedStream):
            return f"{self._where()} sent a malformed stream: {exc}"
        if isinstance(exc, IdleStream | ToolCallLimit):
            return f"{self._where()} {exc}; Tailor gave up on the reply."
        assert isinstance(exc, httpx.HTTPError | httpx.StreamError)
        return self._transport_error(exc)

    def _transport_error(self, exc: httpx.HTTPError | httpx.StreamError) -> str:
        if isinstance(exc, httpx.ConnectTimeout):
            return f"{self._where()} did not accept a connection within {CONNECT_TIMEOUT_S:.0f} s."
        if isinstance(exc, httpx.TimeoutException):
            return f"{self._where()} stopped answering (nothing for {self.endpoint.read_timeout_s:.0f} s)."
        if isinstance(exc, httpx.ConnectError):
            return f"{self._where()} cannot be reached: {exc}"
        return f"{self._where()} failed: {type(exc).__name__}: {exc}"


@dataclass(slots=True, frozen=True)
class _Usage:
    """The token counts a server reports; None where it said nothing (or nothing sensible)."""

    prompt: int | None = None
    cached: int | None = None
    completion: int | None = None
    reasoning: int | None = None  # of `completion`, the tokens spent reasoning

    @staticmethod
    def of(event: dict[str, Any]) -> _Usage | None:
        usage = event.get("usage")
        if not isinstance(usage, dict):
            return None
        details = usage.get("prompt_tokens_details")
        cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
        details = usage.get("completion_tokens_details")
        reasoning = _count(details.get("reasoning_tokens")) if isinstance(details, dict) else None
        return _Usage(
            _count(usage.get("prompt_tokens")), cached, _count(usage.get("completion_tokens")), reasoning)

    def counts(self, taken: int, cut: bool) -> ReplyCounts:
        """The Done's figures: the server's, unless the guard cut the reply (`taken` tokens): then they
        are not of what was kept."""
        generated = taken if cut or self.completion is None else self.completion
        return ReplyCounts(generated, self.prompt, self.cached, None if cut else self.reasoning)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _interrupt_later(response: httpx.Response) -> threading.Timer:
    """Interrupt `response` TAIL_S from now: what a correct server sends after the last token comes at once."""
    timer = threading.Timer(TAIL_S, interrupt, (response,))
    timer.daemon = True
    timer.start()
    return timer


def _take_choices(event: dict[str, Any], tally: ReplyTally, guard: ReplyGuard) -> tuple[list[Token], bool,
                                                                                         FinishReason | None]:
    """The tokens one event's choices add (within the guard's budget), whether a token came past max_tokens
    (the server ignores the limit: the reply is cut there, length-limited), and the finish reason the event
    gave, if any ("stop" for tool calls: the Done says "tool_calls" when it has some).

    A piece of a tool call counts as a token (the server counts its tokens against max_tokens too); its
    calls are taken where the tally takes them, and passed over where no tools were sent."""
    tokens: list[Token] = []
    finish: FinishReason | None = None
    for text, shown, reason, calls in _choices(event):
        if (text or calls) and guard.full:
            return tokens, True, "length"
        token = tally.heard(guard.take(text), shown) if text or calls else None
        if token is not None:
            tokens.append(token)
        if calls and tally.calls is not None:
            tally.calls.add(calls)
        if reason:
            finish = "stop" if reason in ("stop", "tool_calls") else "length"
    return tokens, False, finish


def _choices(event: dict[str, Any]) -> Iterator[tuple[str, bool, str | None, Any]]:
    """The pieces of each choice: (text, whether it is reply text, the finish reason, the delta's
    `tool_calls` as sent: None when it has none); "" for no text.

    Reasoning (`reasoning_content` as DeepSeek and llama-server send it, vLLM's `reasoning`) is a piece
    of its own, before the answer's when one delta holds both: it is not part of the reply, but it
    counts (the server counts it against `max_tokens`, and a model thinking for minutes is not idle).
    The finish reason comes with the last piece.
    """
    choices = event.get("choices")
    if choices is None:
        return
    if not isinstance(choices, list):
        raise MalformedStream(f"an event's choices are not a list: {str(choices)[:80]!r}")
    for choice in choices:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if delta is None:
            delta = {}
        if not isinstance(choice, dict) or not isinstance(delta, dict):
            raise MalformedStream(f"an event's choice is not an object with a delta: {str(choice)[:80]!r}")
        content = delta.get("content")
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if content is not None and not isinstance(content, str):
            raise MalformedStream(f"a token is not text: {str(content)[:80]!r}")
        reason = choice.get("finish_reason")
        if isinstance(reasoning, str) and reasoning:
            yield reasoning, False, None, None
        yield content or "", True, reason if isinstance(reason, str) else None, delta.get("tool_calls")


def _error_text(body: Any) -> str:
    """The server's own error message, at most MAX_DETAIL characters of it."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        text = str(error.get("message") or error)
    elif isinstance(error, str):
        text = error
    elif isinstance(body, dict) and isinstance(body.get("detail"), str):
        text = body["detail"]
    else:
        text = str(body)
    return text[:MAX_DETAIL]
