"""The server's gate, as ASGI middleware: Host, Origin (CORS), API key and body size.

Checked in that order, before any handler runs: a request from a DNS-rebinding page
(a foreign Host) is refused with 403 even when it carries no key; a browser preflight is
answered without a key (browsers never send one there); a missing or wrong key is 401; a
body over the limit is 413, and is never read past the limit; a body that does not arrive
within the body timeout is 408.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from app.server.anthropic import errors as anthropic_errors
from app.server.config import ServerConfig
from app.server.errors import ApiError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_PREFLIGHT_MAX_AGE = "600"
_ALLOWED_METHODS = "GET, POST, OPTIONS"


class Guard:
    """Wraps the server's ASGI app with its access rules.

    Args:
        app: the ASGI app behind the gate.
        config: host names, origins, key and body limit.
    """

    def __init__(self, app: ASGIApp, config: ServerConfig):
        self.app = app
        self.config = config
        self.hosts = config.host_names()
        self.origins = frozenset(o.rstrip("/") for o in config.allow_origins)
        self._key = _digest(config.api_key.encode("utf-8")) if config.api_key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        origin = headers.get("origin")
        cors = self._cors_headers(origin)
        try:
            self._check_host(headers.get("host", ""))
            if origin is not None and not cors:
                raise ApiError(
                    403, f"Cross-origin requests from {origin} are not allowed: start the server with "
                    "--allow-origin to let a browser page use it.", "permission_error", None, "origin_not_allowed",
                )
            if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
                await _send_preflight(send, cors, headers.get("access-control-request-headers"))
                return
            self._check_key(headers.get("authorization"), headers.get("x-api-key"))
            body = await self._read_body(headers, receive)
        except ApiError as error:
            # Anthropic's clients read its own envelope, on its routes.
            envelope = scope.get("path", "").startswith(anthropic_errors.PATH_PREFIX)
            await send_error(send, error, cors, anthropic=envelope)
            return
        await self.app(scope, _replay(body, receive), _with_headers(send, cors))

    # ------------------------------------------------------------ checks

    def _check_host(self, host: str) -> None:
        name = host.rsplit("]", 1)[0].lstrip("[") if host.startswith("[") else host.split(":", 1)[0]
        if name.lower() not in self.hosts:
            raise ApiError(
                403, f"Host {host!r} is not this server's: use http://127.0.0.1 or http://localhost.",
                "permission_error", None, "host_not_allowed",
            )

    def _check_key(self, authorization: str | None, api_key: str | None = None) -> None:
        """The key, as `Authorization: Bearer KEY` (OpenAI's clients) or `x-api-key: KEY` (Anthropic's); either
        one that matches lets the request in."""
        if self._key is None:
            return
        scheme, _, token = (authorization or "").partition(" ")
        sent = [token] if scheme.lower() == "bearer" else []
        if api_key is not None:
            sent.append(api_key)
        # Header values were decoded as latin-1, which gives back the bytes as sent; those are
        # compared with the key's UTF-8 bytes, through a digest so that not even the length shows.
        matches = [hmac.compare_digest(_digest(value.strip(" \t").encode("latin-1")), self._key) for value in sent]
        if not any(matches):
            message = "Missing API key" if not authorization and api_key is None else "Incorrect API key"
            raise ApiError(
                401, f"{message}: send it as 'Authorization: Bearer KEY' (or 'x-api-key: KEY').",
                "invalid_request_error", None, "invalid_api_key",
            )

    async def _read_body(self, headers: dict[str, str], receive: Receive) -> bytes:
        """The whole body, refused as soon as it passes the limit (413) or its time (408)."""
        limit = self.config.max_body_bytes
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise _too_large(limit)
        timeout = self.config.body_timeout_s
        try:
            async with asyncio.timeout(timeout):
                return await self._read_chunks(receive, limit)
        except TimeoutError:
            raise ApiError(
                408, f"The request body did not arrive within {timeout:g} s.", "invalid_request_error", None,
                "request_timeout",
            ) from None

    @staticmethod
    async def _read_chunks(receive: Receive, limit: int) -> bytes:
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # disconnected; the handler sees it next
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    def _cors_headers(self, origin: str | None) -> list[tuple[bytes, bytes]]:
        if origin is None or not (origin.rstrip("/") in self.origins or "*" in self.origins):
            return []
        return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _too_large(limit: int) -> ApiError:
    return ApiError(
        413, f"The request body is over the server's limit of {limit:,} bytes.", "invalid_request_error",
        None, "request_too_large",
    )


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the body once, then the real one (which reports a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _with_headers(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    if not extra:
        return send

    async def send_with(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return send_with


async def send_error(send: Send, error: ApiError, extra: list[tuple[bytes, bytes]] | None = None,
                     anthropic: bool = False) -> None:
    """Answer with an OpenAI-style error body (`anthropic`: in Anthropic's envelope and status)."""
    status, body = anthropic_errors.body_bytes(error) if anthropic else (error.status, error.body_bytes())
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(extra or [])]
    if error.status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    if error.status == 408:  # the client stalled mid-body: the connection is of no further use
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _send_preflight(send: Send, cors: list[tuple[bytes, bytes]], requested: str | None) -> None:
    headers = [
        *cors,
        (b"access-control-allow-methods", _ALLOWED_METHODS.encode()),
        (b"access-control-allow-headers", (requested or "authorization, content-type").encode("latin-1")),
        (b"access-control-max-age", _PREFLIGHT_MAX_AGE.encode()),
        (b"content-length", b"0"),
    ]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})
