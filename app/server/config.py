"""ServerConfig: where the server listens and who may talk to it."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

import psutil

from engine.protocol import DEFAULT_PARALLEL, MAX_PARALLEL

DEFAULT_PORT = 8080
OLLAMA_PORT = 11434  # Ollama's own: where apps with an "Ollama" provider look first
# A full 128k-token context of text is well under 4 MiB; images come inline as base64 (4/3 of the file: a
# phone photo is 3 to 8 MB), so a chat with a few pictures needs tens of megabytes.
DEFAULT_MAX_BODY_BYTES = 64 << 20
# A real client sends its request head in one packet and its body at network speed; these
# only bound clients that stall (or hold sockets on purpose).
DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_BODY_TIMEOUT_S = 30.0
# Requests beyond the replies running wait on their connection, so this also bounds the queue.
DEFAULT_MAX_CONNECTIONS = 100
# A request waits this long at most for a free reply slot, then gets a 503 (llama-server waits forever;
# a client that is told to come back can retry, one that hangs cannot tell a busy server from a dead one).
DEFAULT_QUEUE_TIMEOUT_S = 120.0
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


class ServerConfigError(ValueError):
    """Settings the server refuses to start with (the message says what to change)."""


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_api_key(key: str) -> None:
    """Refuse a key no client could send in an `Authorization` header.

    Any other text is allowed and matched as the UTF-8 bytes a client sends; HTTP strips the
    spaces around a header value and forbids control characters in it.
    """
    if not key:
        raise ServerConfigError("--api-key is empty: give the key clients must send, or leave the option out.")
    if key != key.strip(" \t"):
        raise ServerConfigError("--api-key starts or ends with a space, which no HTTP client can send.")
    bad = next((c for c in key if ord(c) < 0x20 or ord(c) == 0x7F), None)
    if bad is not None:
        raise ServerConfigError(f"--api-key contains the control character {bad!r}, which cannot travel in a header.")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in key):
        raise ServerConfigError("--api-key is not valid UTF-8 text.")


def is_wildcard(host: str) -> bool:
    return host in ("0.0.0.0", "::", "")


@dataclass(slots=True, frozen=True)
class ServerConfig:
    """How the server listens.

    Args:
        host: address to bind; anything but loopback needs `allow_remote` and an `api_key`.
        port: TCP port; 0 picks a free one.
        api_key: bearer token every request must carry; None accepts requests without one.
        allow_origins: browser origins allowed by CORS; empty turns cross-origin requests away.
        allow_remote: the explicit consent to bind a non-loopback address.
        allow_hosts: more names the server may be reached by (the Host header), when remote.
        max_body_bytes: larger request bodies are refused with 413.
        header_timeout_s: a request head must arrive within this long (408 and closed otherwise).
        body_timeout_s: the whole body must arrive within this long after the head (408).
        max_connections: open connections at most; see app/server/connections.py.
        parallel: replies the server runs at once (the engine batches them); the others queue.
        queue_timeout_s: a queued request gets a 503 after waiting this long for its turn.
        allow_image_urls: fetch the http(s) image URLs requests name (app/server/image_parts.py); off, only
            inline data: URLs are taken.
        ollama_port: a second port the same app listens on, for apps that look for Ollama on its port
            (11434); None: none. 0 picks a free one.
    """

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    api_key: str | None = None
    allow_origins: tuple[str, ...] = ()
    allow_remote: bool = False
    allow_hosts: tuple[str, ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    parallel: int = DEFAULT_PARALLEL
    queue_timeout_s: float = DEFAULT_QUEUE_TIMEOUT_S
    allow_image_urls: bool = False
    ollama_port: int | None = None

    def check(self) -> None:
        """Raise ServerConfigError for settings that would expose the model by accident."""
        if not 0 <= self.port <= 65535:
            raise ServerConfigError(f"Port {self.port} is out of range (0-65535).")
        if self.ollama_port is not None and not 0 <= self.ollama_port <= 65535:
            raise ServerConfigError(f"--ollama-port {self.ollama_port} is out of range (0-65535).")
        if self.api_key is not None:
            check_api_key(self.api_key)
        if self.max_connections < 1 or self.header_timeout_s <= 0 or self.body_timeout_s <= 0:
            raise ServerConfigError("The connection limit and the timeouts must be positive.")
        if not 1 <= self.parallel <= MAX_PARALLEL:
            raise ServerConfigError(
                f"--parallel must be 1 to {MAX_PARALLEL} replies at once, not {self.parallel} (each is a sequence "
                "of the model's one context; more requests than that wait in the queue)."
            )
        if not self.queue_timeout_s > 0:
            raise ServerConfigError(f"--queue-timeout must be a positive number of seconds, not {self.queue_timeout_s}.")
        if is_loopback(self.host):
            return
        if not self.allow_remote:
            raise ServerConfigError(
                f"Binding {self.host} makes the model reachable from other machines: "
                "pass --allow-remote and --api-key to do that on purpose."
            )
        if not self.api_key:
            raise ServerConfigError(f"Binding {self.host} needs an API key (--api-key).")

    def host_names(self) -> frozenset[str]:
        """The Host header values accepted (without port): loopback names and this server's own."""
        names = {"localhost", "127.0.0.1", "::1", *(h.lower() for h in self.allow_hosts)}
        if is_wildcard(self.host):
            # Reached under any of this machine's own names and addresses (a key is required here).
            names.update({socket.gethostname().lower(), socket.getfqdn().lower()})
            for addresses in psutil.net_if_addrs().values():
                names.update(a.address.split("%")[0].lower() for a in addresses if a.family in _INET)
        else:
            names.add(self.host.strip("[]").lower())
        return frozenset(names)


_INET = (socket.AF_INET, socket.AF_INET6)
