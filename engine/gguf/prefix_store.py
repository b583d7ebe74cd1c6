"""The disk tier of the prefix cache: saved sequence states that survive an engine restart.

One file per entry under the cache folder:

    MAGIC (8 bytes) | header length (u32, little-endian) | header (JSON) | tokens (int32 LE) | state

The header holds the format version, the llama-cpp-python version (which pins llama.cpp's
state format), the model identity, the settings key, the token count, the state's length and
a SHA-256 of tokens + state. A file that is truncated, corrupted, of another version, or made
for a model file that no longer exists as it was, is never loaded: it is deleted. Files are
written by one background thread (write to a temporary name, then rename); a write that fails
(a full disk) drops the entry and nothing else.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import struct
import sys
import threading
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.gguf.llama_handle import VERSION
from engine.gguf.prefix_cache import CacheEntry, CacheKey, common_prefix_len, model_identity

log = logging.getLogger(__name__)

MAGIC = b"TAILORKV"
FORMAT_VERSION = 1
SUFFIX = ".tkv"
_HEADER_LEN = struct.Struct("<I")
_MAX_HEADER = 64 * 1024


@dataclass(slots=True, eq=False)
class DiskEntry:
    path: Path
    key: CacheKey
    tokens: tuple[int, ...]
    nbytes: int  # the whole file


class CorruptEntry(Exception):
    """The file is not a valid entry of this version."""


def engine_version() -> str:
    return f"llama-cpp-python {VERSION}"


def _digest(tokens: bytes, state: bytes | bytearray | memoryview) -> str:
    h = hashlib.sha256(tokens)
    h.update(state)
    return h.hexdigest()


def _read_header(f) -> tuple[dict, int]:
    """The header and the offset where the tokens start; CorruptEntry if it is not ours."""
    head = f.read(len(MAGIC) + _HEADER_LEN.size)
    if len(head) < len(MAGIC) + _HEADER_LEN.size or head[: len(MAGIC)] != MAGIC:
        raise CorruptEntry("not a Tailor prefix cache entry")
    (n,) = _HEADER_LEN.unpack_from(head, len(MAGIC))
    if n > _MAX_HEADER:
        raise CorruptEntry("header too long")
    try:
        header = json.loads(f.read(n).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptEntry(f"bad header: {exc}") from None
    if not isinstance(header, dict):
        raise CorruptEntry("bad header")
    if header.get("format") != FORMAT_VERSION or header.get("engine") != engine_version():
        raise CorruptEntry(f"written by another version ({header.get('format')}, {header.get('engine')})")
    return header, len(head) + n


def write_entry(path: Path, entry: CacheEntry) -> None:
    """Write `entry` to `path` atomically; OSError (a full disk) leaves no file behind."""
    token_bytes = _token_bytes(entry.tokens)
    header = json.dumps(
        {
            "format": FORMAT_VERSION,
            "engine": engine_version(),
            "model": entry.key.model,
            "settings": entry.key.settings,
            "n_tokens": len(entry.tokens),
            "state_bytes": len(entry.state),
            "sha256": _digest(token_bytes, entry.state),
        }
    ).encode("utf-8")
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(MAGIC + _HEADER_LEN.pack(len(header)) + header + token_bytes)
            f.write(entry.state)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def _token_bytes(tokens: Sequence[int]) -> bytes:
    """Token ids as int32 little-endian."""
    arr = array("i", tokens)
    if sys.byteorder != "little":  # pragma: no cover - big-endian hosts
        arr.byteswap()
    return arr.tobytes()


def _tokens_from(data: bytes) -> tuple[int, ...]:
    tokens = array("i")
    tokens.frombytes(data)
    if sys.byteorder != "little":  # pragma: no cover
        tokens.byteswap()
    return tuple(tokens)


def read_index(path: Path) -> DiskEntry:
    """The key and tokens of an entry file, without its state; CorruptEntry if it is invalid."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        header, offset = _read_header(f)
        try:
            n_tokens, state_bytes = int(header["n_tokens"]), int(header["state_bytes"])
            key = CacheKey(str(header["model"]), str(header["settings"]))
            str(header["sha256"])
        except (KeyError, TypeError, ValueError):
            raise CorruptEntry("incomplete header") from None
        if n_tokens <= 0 or size != offset + 4 * n_tokens + state_bytes:
            raise CorruptEntry(
                f"{size} bytes, not the {offset + 4 * n_tokens + state_bytes} its header states"
            )
        token_bytes = f.read(4 * n_tokens)
    return DiskEntry(path, key, _tokens_from(token_bytes), size)


def read_entry(path: Path) -> CacheEntry:
    """The whole entry, checksum verified; CorruptEntry if anything is off."""
    with open(path, "rb") as f:
        header, _ = _read_header(f)
        try:
            n_tokens, state_bytes = int(header["n_tokens"]), int(header["state_bytes"])
            key = CacheKey(str(header["model"]), str(header["settings"]))
            digest = str(header["sha256"])
        except (KeyError, TypeError, ValueError):
            raise CorruptEntry("incomplete header") from None
        token_bytes = f.read(4 * n_tokens)
        state = bytearray(state_bytes)
        got = f.readinto(state)
        if len(token_bytes) != 4 * n_tokens or got != state_bytes or f.read(1):
            raise CorruptEntry("truncated or overlong")
    if _digest(token_bytes, state) != digest:
        raise CorruptEntry("checksum mismatch")
    return CacheEntry(key, _tokens_from(token_bytes), state)


def _model_still_there(identity: str) -> bool:
    """Whether the model file an entry was made for still exists, unchanged."""
    path = Path(identity.split("|", 1)[0])
    try:
        return model_identity(path) == identity
    except OSError:
        return False


class PrefixStore:
    """Entry files under `directory`, oldest deleted first beyond `budget_bytes`.

    Args:
        directory: the cache folder (created if missing).
        budget_bytes: the most the files may take together.
    """

    def __init__(self, directory: Path, budget_bytes: int):
        self.directory = directory
        self.budget_bytes = max(0, budget_bytes)
        self._lock = threading.Lock()
        self._index: dict[Path, DiskEntry] = {}
        self._jobs: queue.Queue[CacheEntry | None] = queue.Queue()
        self._writer: threading.Thread | None = None
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            log.warning("prefix cache folder %s unusable: %s", directory, exc)
            return
        self._scan()

    # ------------------------------------------------------------ reading

    def _scan(self) -> None:
        for path in sorted(self.directory.iterdir(), key=_mtime):
            if path.name.endswith(SUFFIX + ".tmp"):  # left by a crash mid-write
                path.unlink(missing_ok=True)
                continue
            if path.suffix != SUFFIX:
                continue
            try:
                entry = read_index(path)
            except CorruptEntry as exc:
                log.info("prefix cache: removed %s (%s)", path.name, exc)
                path.unlink(missing_ok=True)
                continue
            except OSError:
                continue
            if not _model_still_there(entry.key.model):
                log.info("prefix cache: removed %s (its model file changed or is gone)", path.name)
                path.unlink(missing_ok=True)
                continue
            self._index[path] = entry

    def __len__(self) -> int:
        with self._lock:
            return len(self._index)

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return sum(e.nbytes for e in self._index.values())

    def lookup(self, key: CacheKey, tokens: Sequence[int]) -> tuple[DiskEntry | None, int]:
        """The file sharing the longest prefix with `tokens`, and that length."""
        tokens = tuple(tokens)
        best, best_len = None, 0
        with self._lock:
            candidates = [e for e in self._index.values() if e.key == key]
        for e in candidates:
            n = common_prefix_len(e.tokens, tokens)
            if n > best_len:
                best, best_len = e, n
        return best, best_len

    def load(self, disk_entry: DiskEntry) -> CacheEntry | None:
        """Read and verify one file; a bad one is deleted and None returned."""
        try:
            entry = read_entry(disk_entry.path)
            if entry.key != disk_entry.key or entry.tokens != disk_entry.tokens:
                raise CorruptEntry("changed since it was indexed")
        except (CorruptEntry, OSError) as exc:
            log.info("prefix cache: removed %s (%s)", disk_entry.path.name, exc)
            self._drop(disk_entry.path)
            return None
        try:
            os.utime(disk_entry.path)  # most recently used: evicted last
        except OSError:
            pass
        return entry

    def _drop(self, path: Path) -> None:
        with self._lock:
            self._index.pop(path, None)
        path.unlink(missing_ok=True)

    # ------------------------------------------------------------ writing

    def path_for(self, entry: CacheEntry) -> Path:
        h = hashlib.sha256(f"{entry.key.model}\n{entry.key.settings}\n".encode())
        h.update(_token_bytes(entry.tokens))
        return self.directory / (h.hexdigest()[:32] + SUFFIX)

    def put(self, entry: CacheEntry) -> None:
        """Write `entry` in the background (unless a file holds it already)."""
        if self.budget_bytes <= 0 or len(entry.state) > self.budget_bytes:
            return
        with self._lock:
            if self.path_for(entry) in self._index:
                return
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._write_loop, name="prefix-cache-writer", daemon=True
                )
                self._writer.start()
        self._jobs.put(entry)

    def flush(self) -> None:
        """Wait until every queued entry is written (or dropped)."""
        if self._writer is not None:
            self._jobs.join()

    def close(self) -> None:
        if self._writer is not None:
            self._jobs.put(None)
            self._writer.join()
            self._writer = None

    def _write_loop(self) -> None:
        while True:
            entry = self._jobs.get()
            try:
                if entry is None:
                    return
                self._write(entry)
            except Exception:  # noqa: BLE001 - the cache is an optimisation: never fail the engine
                log.exception("prefix cache: writing an entry failed")
            finally:
                self._jobs.task_done()

    def _write(self, entry: CacheEntry) -> None:
        path = self.path_for(entry)
        try:
            write_entry(path, entry)
        except OSError as exc:
            log.warning("prefix cache: could not write %s (%s); entry dropped", path.name, exc)
            return
        written = DiskEntry(path, entry.key, entry.tokens, path.stat().st_size)
        with self._lock:
            # Entries this one extends answer no lookup better than it does.
            dominated = [
                e.path
                for e in self._index.values()
                if e.key == entry.key
                and len(e.tokens) <= len(entry.tokens)
                and entry.tokens[: len(e.tokens)] == e.tokens
            ]
            self._index[path] = written
        for p in dominated:
            if p != path:
                self._drop(p)
        self._evict()

    def _evict(self) -> None:
        with self._lock:
            entries = sorted(self._index.values(), key=lambda e: _mtime(e.path))
            total = sum(e.nbytes for e in entries)
        for e in entries:
            if total <= self.budget_bytes:
                break
            self._drop(e.path)
            total -= e.nbytes


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
