"""Folder: one folder's files, read and never written, and nothing outside it.

Every path is resolved (`..` and links followed, as the system would) before anything is opened, and must end
inside the folder: `../secret`, `/etc/passwd` and a link inside that leads out are refused alike. Only regular
files are opened: a FIFO, a device or a socket is refused from its `lstat` (opening a FIFO would block until
a writer comes), and the open itself is non-blocking and follows no link, so a file swapped for one of those
in between is caught by `fstat` instead of hanging the server. No MCP SDK here; errors are FolderError, one
line each."""

from __future__ import annotations

import codecs
import fnmatch
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePath

MAX_READ_BYTES = 60 << 10  # one read: with its note it stays under the 64 KiB a model is given of a result
MAX_LISTED = 500  # entries of one folder listed
MAX_FOUND = 200  # matches of one search
MAX_WALKED = 50_000  # entries one search looks at, so a huge tree cannot keep the server busy
# Known binary formats are refused by name, before their first bytes are read (which are checked for NULs too).
BINARY_SUFFIXES = frozenset((
    ".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".ico", ".tif", ".tiff", ".heic", ".mp3", ".wav",
    ".flac", ".ogg", ".m4a", ".mp4", ".mkv", ".mov", ".avi", ".webm", ".zip", ".gz", ".tgz", ".bz2", ".xz",
    ".zst", ".7z", ".rar", ".tar", ".jar", ".whl", ".pdf", ".doc", ".docx", ".xls", ".xlsx", ".ppt",
    ".pptx", ".odt", ".ods", ".exe", ".dll", ".so", ".dylib", ".o", ".a", ".class", ".pyc", ".bin", ".dat",
    ".db", ".sqlite", ".sqlite3", ".gguf", ".safetensors", ".pt", ".pth", ".onnx", ".npy", ".npz", ".pkl",
    ".parquet", ".ttf", ".otf", ".woff", ".woff2", ".iso", ".dmg"))
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))


class FolderError(ValueError):
    """A path or a file this server does not read, and why (one line)."""


@dataclass(slots=True, frozen=True)
class Folder:
    """The folder a files server reads; `root` is resolved (see `at`)."""

    root: Path

    @classmethod
    def at(cls, path: str | Path) -> Folder:
        """The folder at `path`, resolved; FolderError when it is not a folder."""
        root = Path(os.path.realpath(Path(path).expanduser()))
        if not root.is_dir():
            raise FolderError(f"{path} is not a folder")
        return cls(root)

    def locate(self, path: str) -> Path:
        """The real path `path` names (relative to the folder, or absolute), refused when it leads outside."""
        if "\0" in path:
            raise FolderError("a path has no NUL characters")
        given = Path(path.strip() or ".")
        real = Path(os.path.realpath(given if given.is_absolute() else self.root / given))
        if not real.is_relative_to(self.root):
            raise FolderError(f"{path}: outside the folder this server reads")
        return real

    def shown(self, real: Path) -> str:
        """A path as the model gives it back: relative to the folder."""
        return real.relative_to(self.root).as_posix() or "."

    def listing(self, path: str = ".") -> str:
        """The entries of a folder in the folder, one a line: `name/` for folders, `name  1,234 bytes` for
        files, `name  (link)` and `name  (not a regular file)` for the others; at most MAX_LISTED."""
        real = self.locate(path)
        if not stat.S_ISDIR(_lstat(real, path).st_mode):
            raise FolderError(f"{path}: not a folder" + ("; read it with read_file" if real.is_file() else ""))
        try:
            with os.scandir(real) as found:
                entries = sorted(found, key=lambda e: e.name)
        except OSError as exc:
            raise FolderError(f"{path}: cannot be listed ({exc.strerror or exc})") from None
        lines = [_entry_line(entry) for entry in entries[:MAX_LISTED]]
        if len(entries) > MAX_LISTED:
            lines.append(f"[… and {len(entries) - MAX_LISTED:,} more; list a folder inside, or search_files]")
        return "\n".join(lines) if lines else "(an empty folder)"

    def read(self, path: str, offset: int = 0, length: int = MAX_READ_BYTES) -> str:
        """Text of a file in the folder: `length` bytes (at most MAX_READ_BYTES) from byte `offset`, as UTF-8
        (bytes that are not, as U+FFFD), with a last line saying where to read on when the file goes on."""
        real = self.locate(path)
        mode = _lstat(real, path).st_mode
        if stat.S_ISDIR(mode):
            raise FolderError(f"{path}: a folder; list it with list_files")
        if not stat.S_ISREG(mode):
            raise FolderError(f"{path}: not a regular file ({_kind(mode)}); only files are read")
        if real.suffix.lower() in BINARY_SUFFIXES:
            raise FolderError(f"{path}: a binary file ({real.suffix}); only text files are read")
        if offset < 0 or length < 1:
            raise FolderError("offset must be 0 or more, and length 1 or more")
        data, size = _read_regular(real, path, offset, min(length, MAX_READ_BYTES))
        if b"\0" in data:
            raise FolderError(f"{path}: a binary file (it holds NUL bytes); only text files are read")
        text, end = _decode(data, offset, at_end=offset + len(data) >= size)
        if end < size:
            text += f"\n[read bytes {offset:,}–{end:,} of {size:,}; read_file with offset={end} reads on]"
        return text

    def search(self, pattern: str) -> str:
        """The files (and links) under the folder whose name matches a glob such as `*.md` (or, for a pattern
        with a `/`, whose path from the folder matches, as `notes/**/*.txt`), case-insensitively; one a line,
        at most MAX_FOUND."""
        pattern = pattern.strip().lower()
        parts = PurePath(pattern).parts
        if not pattern or PurePath(pattern).is_absolute() or ".." in parts:
            raise FolderError("the pattern is a glob inside the folder: not empty, not absolute, no '..'")
        patterns = [pattern, pattern[3:]] if pattern.startswith("**/") else [pattern]
        found, walked, full = [], 0, False
        # No links followed: a linked folder, inside or not, is not searched.
        for folder, dirs, files in os.walk(self.root, followlinks=False):
            dirs.sort()
            walked += len(dirs) + len(files)
            for name in sorted(files):
                shown = self.shown(Path(folder) / name)
                subject = shown.lower() if "/" in pattern else name.lower()
                if any(fnmatch.fnmatchcase(subject, p) for p in patterns):
                    found.append(shown)
            if len(found) > MAX_FOUND or walked > MAX_WALKED:
                full = True
                break
        lines = found[:MAX_FOUND]
        if full:
            lines.append(f"[stopped after {min(len(found), MAX_FOUND):,} matches and {walked:,} entries looked at;"
                         " give a narrower pattern]")
        return "\n".join(lines) if lines else f"No file matches {pattern!r}."


def _lstat(real: Path, path: str) -> os.stat_result:
    try:
        return os.lstat(real)
    except FileNotFoundError:
        raise FolderError(f"{path}: no such file or folder") from None
    except OSError as exc:
        raise FolderError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def _read_regular(real: Path, path: str, offset: int, length: int) -> tuple[bytes, int]:
    """(`length` bytes from `offset`, the file's size), from a regular file only."""
    try:
        fd = os.open(real, _OPEN_FLAGS)
    except OSError as exc:
        raise FolderError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):  # swapped since its lstat
            raise FolderError(f"{path}: not a regular file ({_kind(status.st_mode)}); only files are read")
        if offset > status.st_size:
            raise FolderError(f"{path}: offset {offset:,} is past its end ({status.st_size:,} bytes)")
        os.lseek(fd, offset, os.SEEK_SET)
        chunks, left = [], length
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), status.st_size
    except OSError as exc:
        raise FolderError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def _decode(data: bytes, offset: int, at_end: bool) -> tuple[str, int]:
    """(the text of `data` read at `offset`, the offset just past the last whole character): a character cut
    at either edge of a read is left to the read that has it whole."""
    skip = 0
    while offset > 0 and skip < min(3, len(data)) and 0x80 <= data[skip] < 0xC0:  # UTF-8 continuation bytes
        skip += 1
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    text = decoder.decode(data[skip:], final=at_end)
    pending = len(decoder.getstate()[0])
    return text, offset + len(data) - pending


def _entry_line(entry: os.DirEntry) -> str:
    try:
        if entry.is_symlink():
            return f"{entry.name}  (link)"
        if entry.is_dir(follow_symlinks=False):
            return f"{entry.name}/"
        status = entry.stat(follow_symlinks=False)
    except OSError:
        return f"{entry.name}  (cannot be read)"
    if stat.S_ISREG(status.st_mode):
        return f"{entry.name}  {status.st_size:,} bytes"
    return f"{entry.name}  (not a regular file: {_kind(status.st_mode)})"


def _kind(mode: int) -> str:
    for check, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
                        (stat.S_ISBLK, "a device"), (stat.S_ISLNK, "a link")):
        if check(mode):
            return name
    return "not a file"
