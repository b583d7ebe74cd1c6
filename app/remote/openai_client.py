"""RemoteChat: one chat reply from an OpenAI-compatible server, as Tailor's engine events.

Streams with httpx; the server's failures become one RemoteError with a message a user can
act on: unreachable, timed out, an HTTP error (with the server's own error text), a stream
that is not OpenAI's format.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from app.remote.sse_reader import MalformedStream, read_events
from engine.protocol import (
    ChatMessage,
    Done,
    Error,
    Event,
    FinishReason,
    GenerationStats,
    SamplingParams,
    Token,
)

CONNECT_TIMEOUT_S = 10.0
# Longest silence between two pieces of a reply (a big prompt's prefill on a busy server included).
READ_TIMEOUT_S = 120.0


class RemoteError(Exception):
    """A remote server failed; the message says which and how."""


@dataclass(slots=True, frozen=True)
class RemoteEndpoint:
    """An OpenAI-compatible server: its base URL (ending in /v1), the model to ask for, the key."""

    url: str
    model: str
    api_key: str | None = None
    read_timeout_s: float = READ_TIMEOUT_S

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
        headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
        timeout = httpx.Timeout(endpoint.read_timeout_s, connect=CONNECT_TIMEOUT_S)
        self._http = httpx.Client(headers=headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def models(self) -> list[str]:
        """The model ids the server lists."""
        body = self._call(lambda: self._http.get(f"{self.endpoint.base}/models"))
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
    ) -> Iterator[Event]:
        """Token events, then one Done (or an Error with kind "remote").

        Stops early when `cancelled()`; `on_response` gets the open response, so a canceller on
        another thread can close it while the server is still silent (a long prefill).
        """
        body: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        t0 = time.perf_counter()
        pieces: list[str] = []
        finish: FinishReason = "length"
        usage: dict[str, int] = {}
        t_first = t_last = None
        chunks = 0
        try:
            with self._http.stream("POST", f"{self.endpoint.base}/chat/completions", json=body) as response:
                if response.status_code >= 400:
                    response.read()
                    raise RemoteError(self._http_error(response))
                if on_response is not None:
                    on_response(response)
                for event in read_events(response.iter_lines()):
                    if "error" in event:
                        raise RemoteError(f"{self._where()} failed mid-reply: {_error_text(event)}")
                    if isinstance(event.get("usage"), dict):
                        usage = event["usage"]
                    for choice in event.get("choices") or []:
                        text = (choice.get("delta") or {}).get("content")
                        if text:
                            now = time.perf_counter()
                            t_first = t_first or now
                            t_last = now
                            chunks += 1
                            pieces.append(text)
                            yield Token(request_id, text)
                        if choice.get("finish_reason"):
                            finish = "stop" if choice["finish_reason"] == "stop" else "length"
                    if cancelled():
                        finish = "cancelled"
                        break
        except RemoteError as exc:
            yield Error("remote", str(exc), request_id)
            return
        except MalformedStream as exc:
            if not cancelled():
                yield Error("remote", f"{self._where()} sent a malformed stream: {exc}", request_id)
                return
            finish = "cancelled"
        except (httpx.HTTPError, httpx.StreamError) as exc:
            if not cancelled():  # else the canceller closed the response: a cancelled reply
                yield Error("remote", self._transport_error(exc), request_id)
                return
            finish = "cancelled"
        t_end = time.perf_counter()
        t_first = t_first or t_end
        gen = int(usage.get("completion_tokens") or chunks)
        decode_s = (t_last or t_end) - t_first
        stats = GenerationStats(
            ttft_s=t_first - t0,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            cached_tokens=int(((usage.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0),
            gen_tokens=gen,
            prefill_tok_s=0.0,  # not known from outside the server
            decode_tok_s=(gen - 1) / decode_s if gen > 1 and decode_s > 0 else 0.0,
        )
        yield Done(request_id, "".join(pieces), finish, stats)

    # ------------------------------------------------------------ errors in words

    def _where(self) -> str:
        return f"The server at {self.endpoint.base}"

    def _call(self, send: Callable[[], httpx.Response]) -> Any:
        try:
            response = send()
        except httpx.HTTPError as exc:
            raise RemoteError(self._transport_error(exc)) from None
        if response.status_code >= 400:
            raise RemoteError(self._http_error(response))
        try:
            return response.json()
        except ValueError:
            raise RemoteError(f"{self._where()} did not answer with JSON.") from None

    def _http_error(self, response: httpx.Response) -> str:
        try:
            detail = _error_text(response.json())
        except ValueError:
            detail = response.text.strip()[:200] or response.reason_phrase
        hint = {401: " (check the API key)", 403: " (not allowed)", 404: " (check the address and model name)"}
        return f"{self._where()} answered {response.status_code}{hint.get(response.status_code, '')}: {detail}"

    def _transport_error(self, exc: httpx.HTTPError | httpx.StreamError) -> str:
        if isinstance(exc, httpx.ConnectTimeout):
            return f"{self._where()} did not accept a connection within {CONNECT_TIMEOUT_S:.0f} s."
        if isinstance(exc, httpx.TimeoutException):
            return f"{self._where()} stopped answering (nothing for {self.endpoint.read_timeout_s:.0f} s)."
        if isinstance(exc, httpx.ConnectError):
            return f"{self._where()} cannot be reached: {exc}"
        return f"{self._where()} failed: {type(exc).__name__}: {exc}"


def _error_text(body: Any) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error)
    if isinstance(error, str):
        return error
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        return body["detail"]
    return str(body)[:200]
