"""One small file fetched over HTTP(S) into memory, under the download module's limits: an image a chat
request names by URL (`tailor serve --allow-image-urls`).

The same HTTP stack as the downloads (models/hub/http_client.py: proxies, the system's certificates,
at most MAX_REDIRECTS), the same stall limit (no byte for `stall_timeout_s`), the same floor rate in
spirit (a server dripping bytes is cut at `deadline_s` in all), and a cap on the bytes: a
Content-Length over it is refused before the body is read, and a body that grows past it is cut
there. Only http and https, on each hop of a redirect too. Every failure is one DownloadError line.
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import httpx2

from models.download.request import DownloadError
from models.hub.http_client import MAX_REDIRECTS, http_client
from models.units import human_size

STALL_TIMEOUT_S = 30.0  # as a download's (models/download/downloader.py)
DEADLINE_S = 60.0


def fetch_small(url: str, max_bytes: int, stall_timeout_s: float = STALL_TIMEOUT_S,
                deadline_s: float = DEADLINE_S) -> bytes:
    """The body of a GET of `url`, at most `max_bytes`.

    Raises:
        DownloadError: the URL is not http(s), the server refuses or fails, the body is over the cap,
            or it stalls or outlasts the deadline.
    """
    _check_scheme(url)
    host = urlsplit(url).hostname or url
    started = time.monotonic()
    hooks = {"request": [lambda request: _check_scheme(str(request.url))]}  # each redirect's hop too
    try:
        with http_client(httpx2.Timeout(stall_timeout_s), keep_alive=False, event_hooks=hooks) as client, \
                client.stream("GET", url) as response:
            if response.status_code >= 400:
                kind = "not_found" if response.status_code in (404, 410) else "refused"
                raise DownloadError(kind, f"{host} answered {response.status_code} for {url}")
            declared = response.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > max_bytes:
                raise DownloadError("refused", f"{url} is {human_size(int(declared))}, over the "
                                               f"{human_size(max_bytes)} taken")
            chunks, size = [], 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    raise DownloadError("refused", f"{url} is over the {human_size(max_bytes)} taken")
                if time.monotonic() - started > deadline_s:
                    raise DownloadError("network", f"{host} took over {deadline_s:.0f} s to send {url}")
                chunks.append(chunk)
            return b"".join(chunks)
    except httpx2.TooManyRedirects:
        raise DownloadError("refused", f"{url} redirects more than {MAX_REDIRECTS} times") from None
    except httpx2.TimeoutException:
        raise DownloadError("network", f"{host} sent nothing for {stall_timeout_s:.0f} s") from None
    except httpx2.HTTPError as exc:
        raise DownloadError("network", f"{host} could not be reached: {exc}") from None


def _check_scheme(url: str) -> None:
    if urlsplit(url).scheme.lower() not in ("http", "https"):
        raise DownloadError("refused", f"only http and https URLs are fetched, not {url[:80]}")
