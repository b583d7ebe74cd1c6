"""Secrets kept apart from the files that name them: API keys of remote endpoints, the env values and
headers of MCP servers.

They go to the system keyring when the `keyring` package has a usable backend there (the Secret Service,
the macOS Keychain, the Windows Credential Locker); otherwise to a file only the user can read (0600).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

KEYRING_SERVICE = "Tailor remote endpoints"
NO_KEYRING = "no keyring"  # KeyStore(backend=NO_KEYRING): keys in the file even where a keyring exists


class KeyStore:
    """Secrets by name: the system keyring if usable, else a 0600 file.

    Args:
        file: the fallback file.
        backend: a keyring backend to use; None asks the `keyring` package for the system's,
            NO_KEYRING uses the file.
        service: the keyring's service name the secrets are filed under (one per kind of secret).
    """

    def __init__(self, file: Path, backend: Any = None, service: str = KEYRING_SERVICE):
        self.file = file
        self.service = service
        if backend is None:
            backend = _system_keyring()
        self.backend = None if backend == NO_KEYRING else backend

    @property
    def where(self) -> str:
        return "the system keyring" if self.backend is not None else f"{self.file} (readable only by you)"

    def get(self, name: str) -> str | None:
        if self.backend is not None:
            with contextlib.suppress(Exception):
                return self.backend.get_password(self.service, name)
        return self._read_file().get(name)

    def set(self, name: str, key: str | None) -> None:
        if not key:
            self.delete(name)
            return
        if self.backend is not None:
            try:
                self.backend.set_password(self.service, name, key)
                return
            except Exception as exc:  # noqa: BLE001 - a locked or broken keyring: use the file
                log.warning("the keyring refused the secret of %s (%s); using %s", name, exc, self.file)
        keys = self._read_file()
        keys[name] = key
        self._write_file(keys)

    def delete(self, name: str) -> None:
        if self.backend is not None:
            with contextlib.suppress(Exception):
                self.backend.delete_password(self.service, name)
        keys = self._read_file()
        if keys.pop(name, None) is not None:
            self._write_file(keys)

    def _read_file(self) -> dict[str, str]:
        try:
            data = json.loads(self.file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}

    def _write_file(self, keys: dict[str, str]) -> None:
        write_private(self.file, json.dumps(keys))


def write_private(file: Path, text: str) -> None:
    """Write `text` to `file` whole or not at all (a temporary file renamed over it), readable only by the
    user from the first byte: a secret is never readable by others, not even briefly."""
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_name(file.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.chmod(tmp, 0o600)
    os.replace(tmp, file)


def _system_keyring() -> Any:
    """The system keyring backend, or None when there is no usable one (a headless Linux, ...)."""
    try:
        import keyring
        from keyring.backends import fail, null
    except ImportError:
        return None
    try:
        backend = keyring.get_keyring()
    except Exception:  # noqa: BLE001 - a broken keyring configuration is no keyring
        return None
    if isinstance(backend, fail.Keyring | null.Keyring) or getattr(backend, "priority", 0) <= 0:
        return None
    return backend
