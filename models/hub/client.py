"""The Hugging Face hub, as the model manager sees it: search repos and read a repo's files.

Built on huggingface_hub's `HfApi`, whose HTTP client is models.hub.http_client's (proxies, the
system's certificate store). Reading a repo retries what a busy hub answers (429 and 5xx, and a
dropped connection) with back-off, waiting at least its Retry-After. Every failure becomes one
`HubError` whose `kind` says what went wrong (the GUI and the CLI word it; `tailor` prints
`message` as one line).
"""

from __future__ import annotations

import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import httpx2
from huggingface_hub import HfApi, get_token, hf_hub_url
from huggingface_hub import errors as hf_errors
from huggingface_hub.hf_api import ModelInfo
from huggingface_hub.utils import _http as hf_http
from huggingface_hub.utils import get_session, hf_raise_for_status

from models.download.http_fetch import retry_after_s
from models.hub.http_client import http_client

log = logging.getLogger(__name__)
T = TypeVar("T")
DEFAULT_ENDPOINT = "https://huggingface.co"
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 30.0
KINDS = ("not_found", "revision_not_found", "gated", "offline", "network", "refused")
SEARCH_KINDS = ("gguf", "awq", "gptq", "fp8")  # the hub's tags of the formats Tailor runs
SORTS = {"downloads": "downloads", "recent": "lastModified"}
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_DRIVE = re.compile(r"^[A-Za-z]:")
_TRUE = {"1", "on", "yes", "true"}
# What a busy or restarting hub answers; worth another try after a wait.
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})


class HubError(Exception):
    """A hub operation failed. `kind` is one of KINDS; `message` is one line naming the repo."""

    def __init__(self, kind: str, message: str) -> None:
        assert kind in KINDS, kind
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(slots=True, frozen=True)
class RepoSummary:
    id: str
    downloads: int
    likes: int
    last_modified: datetime | None
    tags: tuple[str, ...]
    gated: bool
    private: bool


@dataclass(slots=True, frozen=True)
class RepoFile:
    """One file of a repo. `sha256` is the LFS object id (None for small, non-LFS files)."""

    path: str
    size: int
    sha256: str | None
    git_oid: str

    @property
    def is_lfs(self) -> bool:
        return self.sha256 is not None


@dataclass(slots=True, frozen=True)
class RepoDetails:
    id: str
    sha: str  # the commit the file list was read at
    files: tuple[RepoFile, ...]
    gated: bool
    private: bool
    license: str | None
    last_modified: datetime | None
    tags: tuple[str, ...]

    def file(self, path: str) -> RepoFile | None:
        return next((f for f in self.files if f.path == path), None)


def unsafe_path_reason(path: str) -> str | None:
    """Why a file name from the hub must not be written under the cache, or None if it is safe."""
    if not path or "\x00" in path:
        return "is empty or holds a NUL byte"
    if path.startswith(("/", "\\")):
        return "is an absolute path" if not path.startswith("\\\\") else "is a UNC path"
    if _DRIVE.match(path):
        return "names a drive"
    if "\\" in path:
        return "holds a backslash"
    if ".." in path.split("/"):
        return "climbs out of the repo with '..'"
    return None


def check_repo_path(repo_id: str, path: str) -> None:
    reason = unsafe_path_reason(path)
    if reason:
        raise HubError("refused", f"{repo_id}: refused the file name {path!r}: it {reason}")


_factory_lock = threading.Lock()


def _install_timeouts() -> None:
    """Give huggingface_hub's shared HTTP client timeouts (its default waits forever on a stall),
    from the one HTTP stack the downloads use too.

    Left alone if someone installed their own client factory.
    """
    with _factory_lock:
        if getattr(hf_http, "_GLOBAL_CLIENT_FACTORY", None) is not hf_http.default_client_factory:
            return

        def factory() -> httpx2.Client:
            return http_client(_timeout(), event_hooks={"request": [hf_http.hf_request_event_hook]})

        hf_http.set_client_factory(factory)


class HubClient:
    """Search and inspect repos on a hub.

    Args:
        endpoint: The hub's address; default `HF_ENDPOINT` (read now), else huggingface.co.
        token: A token; None: the standard HF location (`HF_TOKEN`, then the token file);
            False: none.
        offline: Never touch the network; default from `HF_HUB_OFFLINE`.
        retries: Further tries of a repo read the hub answered 429 or 5xx (or dropped).
        backoff_s, backoff_max_s: The first wait, doubled after each try up to the maximum; a
            Retry-After is waited out up to the maximum.
        sleep: How to wait (tests record the waits).
    """

    def __init__(self, endpoint: str | None = None, token: str | bool | None = None,
                 offline: bool | None = None, *, retries: int = 4, backoff_s: float = 1.0,
                 backoff_max_s: float = 30.0, sleep: Callable[[float], None] = time.sleep) -> None:
        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        if token is None or token is True:
            token = get_token()
        self.token: str | None = token or None
        if offline is None:
            offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE
        self.offline = offline
        self.retries, self.backoff_s, self.backoff_max_s = retries, backoff_s, backoff_max_s
        self._sleep = sleep
        self._api = HfApi(endpoint=self.endpoint, token=self.token or False)
        _install_timeouts()

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def file_url(self, repo_id: str, path: str, revision: str = "main") -> str:
        check_repo_path(repo_id, path)
        return hf_hub_url(repo_id, path, revision=revision, endpoint=self.endpoint)

    def search(self, query: str = "", kind: str | None = None, sort: str = "downloads",
               limit: int = 20) -> list[RepoSummary]:
        """Model repos matching `query`, most downloaded (or most recently changed) first."""
        if kind is not None and kind not in SEARCH_KINDS:
            raise ValueError(f"unknown kind {kind!r}; use one of {', '.join(SEARCH_KINDS)}")
        if sort not in SORTS:
            raise ValueError(f"unknown sort {sort!r}; use one of {', '.join(SORTS)}")
        what = f"search for {query!r}"
        self._check_online(what)
        params: dict[str, Any] = {"sort": SORTS[sort], "direction": -1, "limit": limit,
                                  "expand": ["downloads", "likes", "lastModified", "tags", "gated", "private"]}
        if query:
            params["search"] = query
        if kind:
            params["filter"] = kind
        # One page, without huggingface_hub's retries: a search is interactive and must
        # fail fast when the hub is unreachable.
        with _mapped(what):
            response = get_session().get(f"{self.endpoint}/api/models", params=params,
                                         headers=self._api._build_hf_headers(), timeout=_timeout())
            hf_raise_for_status(response)
            items = response.json()
        if not isinstance(items, list):
            raise HubError("network", f"{what}: the hub answered something that is not a list of repos")
        out = []
        for item in items[:limit]:
            info = ModelInfo(**{"siblings": None, **item})
            out.append(RepoSummary(info.id, info.downloads or 0, info.likes or 0, info.last_modified,
                                   tuple(info.tags or ()), bool(info.gated), bool(info.private)))
        return out

    def repo_details(self, repo_id: str, revision: str = "main") -> RepoDetails:
        """A repo's state at `revision`: its commit, files (sizes, LFS sha256), gating, license.

        Raises:
            HubError: not found, unknown revision, offline, network, or a refused file name.
        """
        self._check_online(repo_id)
        with _mapped(repo_id, revision):
            info = self._retrying(lambda: self._api.model_info(repo_id, revision=revision, timeout=_timeout()),
                                  repo_id, revision)
        sha = info.sha or ""
        if not _HEX40.match(sha):
            raise HubError("refused", f"{repo_id}: the hub gave {sha!r} as the commit, not 40 hex digits")
        files = []
        with _mapped(repo_id, revision):
            entries = self._retrying(lambda: list(self._api.list_repo_tree(repo_id, recursive=True, revision=sha)),
                                     repo_id, revision)
        for entry in entries:
            if not hasattr(entry, "size"):  # a folder
                continue
            check_repo_path(repo_id, entry.path)
            lfs = entry.lfs.sha256 if entry.lfs is not None else None
            files.append(RepoFile(entry.path, int(entry.size or 0), lfs, entry.blob_id))
        card = info.card_data
        license_ = getattr(card, "license", None) if card is not None else None
        return RepoDetails(info.id or repo_id, sha, tuple(files), bool(info.gated), bool(info.private),
                           license_ if isinstance(license_, str) else None, info.last_modified,
                           tuple(info.tags or ()))

    def _retrying(self, call: Callable[[], T], what: str, revision: str | None = None) -> T:
        """`call()`, tried again after a wait while the hub answers busy."""
        attempt = 0
        while True:
            try:
                return call()
            except Exception as exc:
                transient, retry_after = _transient(exc)
                if not transient or attempt >= self.retries:
                    error = hub_error(exc, what, revision) if transient and attempt else None
                    if error is None:
                        raise
                    raise HubError(error.kind, f"{error.message}, {attempt + 1} times in a row; "
                                               "try again later") from exc
                delay = min(self.backoff_max_s, self.backoff_s * 2**attempt) * random.uniform(0.8, 1.2)
                if retry_after is not None:
                    delay = max(delay, min(retry_after, self.backoff_max_s))
                attempt += 1
                log.info("the hub is busy (%s); try %d in %.1f s", exc, attempt + 1, delay)
                self._sleep(delay)

    def _check_online(self, what: str) -> None:
        if self.offline:
            raise HubError("offline", f"{what}: offline (HF_HUB_OFFLINE is set); only local models are available")


def _timeout() -> httpx2.Timeout:
    return httpx2.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)


def _transient(exc: BaseException) -> tuple[bool, float | None]:
    """Whether another try may succeed, and the Retry-After the hub asked for."""
    if isinstance(exc, hf_errors.HfHubHTTPError) and not isinstance(
            exc, hf_errors.RepositoryNotFoundError | hf_errors.RevisionNotFoundError | hf_errors.GatedRepoError):
        response = exc.response
        if response is not None and response.status_code in TRANSIENT_STATUSES:
            return True, retry_after_s(response.headers.get("Retry-After"))
        return False, None
    # The connection dropped mid-answer (not: unreachable, which is "offline", nor a timeout).
    return isinstance(exc, httpx2.RemoteProtocolError | httpx2.ReadError), None


class _mapped:  # noqa: N801 - used as a `with` block
    """Turn huggingface_hub and httpx errors into HubError."""

    def __init__(self, what: str, revision: str | None = None) -> None:
        self.what, self.revision = what, revision

    def __enter__(self) -> None:
        return None

    def __exit__(self, et: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        if exc is None or isinstance(exc, HubError):
            return False
        error = hub_error(exc, self.what, self.revision)
        if error is None:
            return False
        raise error from exc


def hub_error(exc: BaseException, what: str, revision: str | None = None) -> HubError | None:
    """The HubError for an exception raised by huggingface_hub or httpx, or None if it is neither."""
    w = what
    if isinstance(exc, hf_errors.OfflineModeIsEnabled):
        return HubError("offline", f"{w}: offline (HF_HUB_OFFLINE is set); only local models are available")
    if isinstance(exc, hf_errors.GatedRepoError):
        return HubError("gated", f"{w}: the repo is gated; accept its terms on the hub and log in "
                                 "(hf auth login or HF_TOKEN)")
    if isinstance(exc, hf_errors.RevisionNotFoundError):
        return HubError("revision_not_found", f"{w}: no revision {revision!r} in this repo")
    if isinstance(exc, hf_errors.RepositoryNotFoundError):
        return HubError("not_found", f"{w}: no such repo on the hub (or it is private and needs a token)")
    if isinstance(exc, hf_errors.RemoteEntryNotFoundError):
        return HubError("not_found", f"{w}: no such file in the repo")
    if isinstance(exc, hf_errors.HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else "?"
        return HubError("network", f"{w}: the hub answered HTTP {status}")
    if isinstance(exc, httpx2.ConnectError | httpx2.ConnectTimeout):
        return HubError("offline", f"{w}: cannot reach the hub ({exc}); only local models are available")
    if isinstance(exc, httpx2.TimeoutException):
        return HubError("network", f"{w}: the hub stopped answering (timed out)")
    if isinstance(exc, httpx2.HTTPError | OSError):
        return HubError("network", f"{w}: network error ({exc})")
    if isinstance(exc, ValueError):  # a JSON body that is not JSON
        return HubError("network", f"{w}: the hub's answer could not be read ({exc})")
    return None
