"""Saved remote endpoints: a JSON list in the user data folder, their keys kept apart.

Keys go to the system keyring when the `keyring` package has a usable backend there (the
Secret Service, the macOS Keychain, the Windows Credential Locker); otherwise to a file only
the user can read (0600). The JSON list never holds a key.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass

from app.remote.openai_client import RemoteEndpoint, RemoteError, normalize_url
from app.services.key_store import NO_KEYRING, KeyStore
from app.services.paths import AppPaths

log = logging.getLogger(__name__)

__all__ = ["NO_KEYRING", "EndpointError", "EndpointStore", "KeyStore", "SavedEndpoint"]  # KeyStore lives in app.services


class EndpointError(ValueError):
    """An endpoint that cannot be saved as given (the message says why)."""


@dataclass(slots=True, frozen=True)
class SavedEndpoint:
    name: str
    url: str  # normalized: scheme://host:port/.../v1
    model: str


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
