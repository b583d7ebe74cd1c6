"""ServerConfig: where the server listens and who may talk to it."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

import psutil

DEFAULT_PORT = 8080
# Chat requests are text: even a full 128k-token context is well under this.
DEFAULT_MAX_BODY_BYTES = 4 << 20
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
    """

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    api_key: str | None = None
    allow_origins: tuple[str, ...] = ()
    allow_remote: bool = False
    allow_hosts: tuple[str, ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES

    def check(self) -> None:
        """Raise ServerConfigError for settings that would expose the model by accident."""
        if not 0 <= self.port <= 65535:
            raise ServerConfigError(f"Port {self.port} is out of range (0-65535).")
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
