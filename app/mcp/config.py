"""The MCP servers' configuration file, `mcp.json` in Tailor's config folder, in the `mcpServers` shape
Claude Desktop, LM Studio and Jan use. Every env value and header goes to the keyring (the file keeps a
placeholder); the file is written whole or not at all, readable only by the user. A broken entry is one
error line naming the file and the field; the other servers still load. Keys Tailor does not know are kept."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.mcp.config_entry import EntryError, entry_of, parse_entry
from app.mcp.types import ServerConfig
from app.services.key_store import KeyStore, write_private

KEYRING_SERVICE = "Tailor MCP servers"


class ConfigError(ValueError):
    """A configuration file that cannot be read or written as asked (one line for the user)."""


@dataclass(slots=True, frozen=True)
class LoadedConfig:
    servers: list[ServerConfig]
    errors: list[str] = field(default_factory=list)  # one line each: "FILE: mcpServers.NAME.FIELD: why"


@dataclass(slots=True, frozen=True)
class ImportReport:
    added: list[str]
    skipped: list[str]  # names that exist already (never overwritten)
    errors: list[str]


class McpConfig:
    """Tailor's MCP configuration file.

    Args:
        file: the file (AppPaths.mcp_config).
        keys: where the secrets go (a KeyStore with service KEYRING_SERVICE; see `default_keys`).
    """

    def __init__(self, file: Path, keys: KeyStore):
        self.file = file
        self.keys = keys

    def load(self) -> LoadedConfig:
        """The servers the file describes, and an error line for each one that cannot be used."""
        try:
            entries = read_entries(self.file)
        except ConfigError as exc:
            return LoadedConfig([], [str(exc)])
        servers, errors = [], []
        for name, entry in entries.items():
            try:
                servers.append(parse_entry(name, entry, self._secret))
            except EntryError as exc:
                errors.append(f"{self.file}: mcpServers.{name}: {exc}")
        return LoadedConfig(servers, errors)

    def add(self, server: ServerConfig, *, replace: bool = False) -> None:
        """Save a server; one of that name exists already: ConfigError, unless `replace`."""
        document = self._document()
        entries = document["mcpServers"]
        if server.name in entries and not replace:
            raise ConfigError(f"{self.file} has a server named {server.name} already")
        old = entries.get(server.name)
        entries[server.name] = entry_of(server, old)
        for kind, values in (("env", server.env), ("headers", server.headers)):
            for key, value in values.items():
                self.keys.set(secret_id(server.name, kind, key), value)
        self._forget_secrets(server.name, old, keep=server)
        self._write(document)

    def remove(self, name: str) -> bool:
        """Remove a server and its secrets; False when there is none of that name."""
        document = self._document()
        old = document["mcpServers"].pop(name, None)
        if old is None:
            return False
        self._write(document)
        self._forget_secrets(name, old, keep=None)
        return True

    def set_enabled(self, name: str, enabled: bool) -> None:
        """Turn a server on or off (`"disabled": true` in the file); ConfigError when there is none of that name."""
        document, server = self._entry_to_change(name)
        if enabled:
            server.pop("disabled", None)
            server.pop("active", None)  # Jan's switch, read as disabled when false
        else:
            server["disabled"] = True
        self._write(document)

    def allow_tool(self, name: str, tool: str) -> None:
        """"Always for this tool": the server's tool runs without asking from now on (`alwaysAllow`)."""
        document, server = self._entry_to_change(name)
        allowed = server.get("alwaysAllow") if isinstance(server.get("alwaysAllow"), list) else []
        if tool not in allowed:
            server["alwaysAllow"] = [*allowed, tool]
            self._write(document)

    def _entry_to_change(self, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
        document = self._document()
        server = document["mcpServers"].get(name)
        if not isinstance(server, dict):
            raise ConfigError(f"{self.file} has no server named {name}")
        return document, server

    def import_from(self, path: Path) -> ImportReport:
        """Add the servers of another app's file (same shape); names that exist here are skipped, never
        overwritten. Its env values and headers go to the keyring like those added here."""
        entries = read_entries(path)
        existing = {s for s in self._document()["mcpServers"]}
        added, skipped, errors = [], [], []
        for name, entry in entries.items():
            if name in existing:
                skipped.append(name)
                continue
            try:
                server = parse_entry(name, entry, None)
            except EntryError as exc:
                errors.append(f"{path}: mcpServers.{name}: {exc}")
                continue
            self.add(server)
            added.append(name)
        return ImportReport(added, skipped, errors)

    def _secret(self, server: str, kind: str, key: str) -> str | None:
        return self.keys.get(secret_id(server, kind, key))

    def _forget_secrets(self, name: str, old: Any, keep: ServerConfig | None) -> None:
        if not isinstance(old, dict):
            return
        for kind in ("env", "headers"):
            kept = getattr(keep, kind) if keep is not None else {}
            values = old.get(kind)
            for key in values if isinstance(values, dict) else ():
                if key not in kept:
                    self.keys.delete(secret_id(name, kind, key))

    def _document(self) -> dict[str, Any]:
        """The whole file as JSON, to change and write back (a file that cannot be read is never replaced)."""
        if not self.file.exists():
            return {"mcpServers": {}}
        document = _read_json(self.file)
        read_entries(self.file, document)
        document.setdefault("mcpServers", {})
        return document

    def _write(self, document: dict[str, Any]) -> None:
        try:
            write_private(self.file, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        except OSError as exc:
            raise ConfigError(f"cannot write {self.file}: {exc.strerror or exc}") from None


def default_keys(secrets_file: Path) -> KeyStore:
    """The key store for MCP secrets: the system keyring, else `secrets_file` (AppPaths.mcp_secrets)."""
    return KeyStore(secrets_file, service=KEYRING_SERVICE)


def secret_id(server: str, kind: str, key: str) -> str:
    """The name a secret is filed under: unambiguous whatever the server's and the key's names hold."""
    return json.dumps([server, kind, key])


def read_entries(path: Path, document: Any = None) -> dict[str, Any]:
    """The `mcpServers` object of a file (an empty one where the file has none)."""
    if document is None:
        if not path.exists():
            return {}
        document = _read_json(path)
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: must hold a JSON object with `mcpServers`")
    entries = document.get("mcpServers", {})
    if not isinstance(entries, dict):
        raise ConfigError(f"{path}: mcpServers: must be an object of server names to servers")
    return entries


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not JSON (not UTF-8 text)") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
