"""What a download is, what it reports, and how it fails; the Downloader is in `models.download.downloader`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

ErrorKind = Literal["checksum", "disk_full", "network", "refused", "cancelled", "not_found", "gated"]
State = Literal["queued", "running", "paused", "done", "failed", "cancelled"]
TERMINAL_STATES: frozenset[str] = frozenset({"done", "failed", "cancelled"})


class DownloadError(Exception):
    """The one way a download fails: a kind the UI can switch on and one line a user can read."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message

    def __repr__(self) -> str:
        return f"DownloadError({self.kind!r}, {self.message!r})"


@dataclass(frozen=True, slots=True)
class DownloadFile:
    """One file of a repo, with its URL already resolved by the hub client.

    Attributes:
        path_in_repo: The file's name in the repo ("sub/dir/model.Q4_K_M.gguf").
        url: Where to GET its bytes (the hub's resolve URL or the CDN's).
        size: Its size in bytes.
        sha256: The LFS object id (checked after download), or None for small git files.
        etag: The hub's ETag (git sha1 of small files, sha256 of LFS files); names the blob.
    """

    path_in_repo: str
    url: str
    size: int
    sha256: str | None = None
    etag: str | None = None

    @property
    def blob_id(self) -> str:
        """The raw id the blob is named after (validated by the downloader)."""
        return self.etag or self.sha256 or ""

    def to_dict(self) -> dict:
        return {"path_in_repo": self.path_in_repo, "url": self.url, "size": self.size,
                "sha256": self.sha256, "etag": self.etag}

    @classmethod
    def from_dict(cls, data: dict) -> DownloadFile:
        return cls(str(data["path_in_repo"]), str(data["url"]), int(data["size"]),
                   data.get("sha256"), data.get("etag"))


@dataclass(frozen=True, slots=True)
class DownloadRequest:
    """One download: some files of one repo at one commit.

    Attributes:
        repo_id: "org/name".
        revision: The commit hash (40 hex) the files belong to.
        files: The files to fetch.
        ref: The branch or tag that resolved to `revision` ("main"), written to refs/; None writes none.
    """

    repo_id: str
    revision: str
    files: tuple[DownloadFile, ...]
    ref: str | None = None

    @property
    def key(self) -> str:
        return f"{self.repo_id}@{self.revision}:" + ",".join(sorted(f.path_in_repo for f in self.files))

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_dict(self) -> dict:
        return {"repo_id": self.repo_id, "revision": self.revision, "ref": self.ref,
                "files": [f.to_dict() for f in self.files]}

    @classmethod
    def from_dict(cls, data: dict) -> DownloadRequest:
        return cls(str(data["repo_id"]), str(data["revision"]),
                   tuple(DownloadFile.from_dict(f) for f in data["files"]), data.get("ref"))


@dataclass(frozen=True, slots=True)
class Progress:
    """Progress of one download, a few times a second.

    Attributes:
        download_id: Which download.
        path_in_repo: The file being fetched now (None before the first and after the last).
        file_done, file_total: Bytes of that file on disk / expected.
        done, total: Bytes of the whole download on disk / expected.
        speed_bps: Bytes per second over the last few seconds.
        eta_s: Seconds left at that speed (None while unknown).
        note: What the download is doing when it is not fetching, e.g. "waiting for another
            download of this file" (another process holds the file's lock).
    """

    download_id: int
    path_in_repo: str | None
    file_done: int
    file_total: int
    done: int
    total: int
    speed_bps: float
    eta_s: float | None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class StateChanged:
    """A download moved to `state`; `error` is set when it is "failed" or "cancelled"."""

    download_id: int
    state: State
    error: DownloadError | None = None
    snapshot_dir: str | None = None


@dataclass(slots=True)
class FileOutcome:
    """What happened to one file (for the CLI's last lines and the tests).

    Attributes:
        fetched_bytes: Body bytes received over every attempt.
        attempts: Requests made for it.
        restarted: Times a server ignored Range and it started over from byte 0.
        delays: The back-off waits before each retry, in seconds.
        waited_for_lock: Another download held the file's lock when this one came to it.
        reused: That other download stored the file meanwhile, so nothing was fetched here.
    """

    path_in_repo: str
    local_path: str | None = None
    fetched_bytes: int = 0
    attempts: int = 0
    restarted: int = 0
    delays: list[float] = field(default_factory=list)
    waited_for_lock: bool = False
    reused: bool = False
    extra: dict = field(default_factory=dict)
