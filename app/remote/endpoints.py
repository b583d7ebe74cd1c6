"""Saved remote endpoints: a JSON list in the user data folder, their keys kept apart.

Keys go to the system keyring when the `keyring` package has a usable backend there (the
Secret Service, the macOS Keychain, the Windows Credential Locker); otherwise to a file only
the user can read (0600). The JSON list never holds a key.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app.remote.openai_client import RemoteEndpoint, RemoteError, normalize_url
from app.services.paths import AppPaths

log = logging.getLogger(__name__)

KEYRING_SERVICE = "Tailor remote endpoints"
NO_KEYRING = "no keyring"  # KeyStore(backend=NO_KEYRING): keys in the file even where a keyring exists


class EndpointError(ValueError):
    """An endpoint that cannot be saved as given (the message says why)."""


@dataclass(slots=True, frozen=True)
class SavedEndpoint:
    name: str
    url: str  # normalized: scheme://host:port/.../v1
    model: str


class KeyStore:
    """API keys by endpoint name: the system keyring if usable, else a 0600 file.

    Args:
        file: the fallback file.
        backend: a keyring backend to use; None asks the `keyring` package for the system's,
            NO_KEYRING uses the file.
    """

    def __init__(self, file: Path, backend: Any = None):
        self.file = file
        if backend is None:
            backend = _system_keyring()
        self.backend = None if backend == NO_KEYRING else backend

    @property
    def where(self) -> str:
        return "the system keyring" if self.backend is not None else f"{self.file} (readable only by you)"

    def get(self, name: str) -> str | None:
        if self.backend is not None:
            with contextlib.suppress(Exception):
                return self.backend.get_password(KEYRING_SERVICE, name)
        return self._read_file().get(name)

    def set(self, name: str, key: str | None) -> None:
        if not key:
            self.delete(name)
            return
        if self.backend is not None:
            try:
                self.backend.set_password(KEYRING_SERVICE, name, key)
                return
            except Exception as exc:  # noqa: BLE001 - a locked or broken keyring: use the file
                log.warning("the keyring refused the key of %s (%s); using %s", name, exc, self.file)
        keys = self._read_file()
        keys[name] = key
        self._write_file(keys)

    def delete(self, name: str) -> None:
        if self.backend is not None:
            with contextlib.suppress(Exception):
                self.backend.delete_password(KEYRING_SERVICE, name)
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
        self.file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.file.with_suffix(".tmp")
        # Created 0600 from the first byte: the key is never readable by others, not even briefly.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(keys, out)
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.file)


class EndpointStore:
    """The saved endpoints of one user.

    Args:
        paths: where the list and the key file live.
        keys: the key store; None builds one on the system keyring (or the file).
    """

    def __init__(self, paths: AppPaths | None = None, keys: KeyStore | None = None):
        paths = paths or AppPaths.default()
        self.file = paths.data_dir / "endpoints.json"
        self.keys = keys or KeyStore(paths.data_dir / "endpoint-keys.json")

    def list(self) -> list[SavedEndpoint]:
        try:
            data = json.loads(self.file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            log.warning("unreadable endpoint list %s: %s", self.file, exc)
            return []
        items = data.get("endpoints", []) if isinstance(data, dict) else []
        return [
            SavedEndpoint(e["name"], e["url"], e["model"])
            for e in items
            if isinstance(e, dict) and all(isinstance(e.get(k), str) for k in ("name", "url", "model"))
        ]

    def get(self, name: str) -> SavedEndpoint | None:
        return next((e for e in self.list() if e.name == name), None)

    def add(self, name: str, url: str, model: str, api_key: str | None = None) -> SavedEndpoint:
        """Save (or replace) an endpoint; its key goes to the key store."""
        name, model = name.strip(), model.strip()
        if not name or not model:
            raise EndpointError("An endpoint needs a name and a model.")
        try:
            endpoint = SavedEndpoint(name, normalize_url(url), model)
        except RemoteError as exc:
            raise EndpointError(str(exc)) from None
        endpoints = [e for e in self.list() if e.name != name] + [endpoint]
        self._write(endpoints)
        self.keys.set(name, api_key)
        return endpoint

    def remove(self, name: str) -> None:
        self._write([e for e in self.list() if e.name != name])
        self.keys.delete(name)

    def endpoint(self, name: str) -> RemoteEndpoint | None:
        """The saved endpoint with its key, ready to connect."""
        saved = self.get(name)
        if saved is None:
            return None
        return RemoteEndpoint(saved.url, saved.model, self.keys.get(name))

    def key_for_url(self, url: str) -> str | None:
        """The key saved with an endpoint at this address, if any (for `tailor chat --endpoint`)."""
        target = normalize_url(url)
        return next((self.keys.get(e.name) for e in self.list() if e.url == target), None)

    def _write(self, endpoints: list[SavedEndpoint]) -> None:
        self.file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"endpoints": [asdict(e) for e in endpoints]}, indent=1), encoding="utf-8")
        os.replace(tmp, self.file)


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
