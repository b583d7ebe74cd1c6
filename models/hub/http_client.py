"""The one HTTP stack of every call Tailor makes to a hub: the hub's API and the downloads.

httpx2, which huggingface_hub itself runs on, set up the same way for both, so a proxy or a
company certificate that works for one works for the other:

- proxies from the environment (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY`, upper or
  lower case), https through a CONNECT tunnel;
- certificates checked against the system's store: on Linux OpenSSL's default paths (what
  `ssl.create_default_context()` loads), on Windows and macOS the OS store (through truststore),
  or the file or folder named by `SSL_CERT_FILE` / `SSL_CERT_DIR`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx2

USER_AGENT = "tailor/0.1 (model downloader)"
MAX_REDIRECTS = 10


def http_client(
    timeout: httpx2.Timeout,
    *,
    keep_alive: bool = True,
    event_hooks: Mapping[str, Sequence[Callable[..., Any]]] | None = None,
) -> httpx2.Client:
    """A client with the proxies and certificate store above.

    Args:
        timeout: Connect and per-read limits.
        keep_alive: False closes each connection after its answer (a download's sockets are then
            always new, so the downloader sees each one and can shut it to stop a blocked read).
        event_hooks: httpx2's request/response hooks (huggingface_hub adds its own).
    """
    limits = httpx2.Limits() if keep_alive else httpx2.Limits(max_keepalive_connections=0)
    return httpx2.Client(
        follow_redirects=True,  # Authorization is dropped when a redirect leaves the origin (the CDN)
        max_redirects=MAX_REDIRECTS,
        timeout=timeout,
        trust_env=True,
        verify=True,
        limits=limits,
        event_hooks=dict(event_hooks or {}),
    )
