"""One entry of `mcpServers` read into a ServerConfig and written back: the shape Claude Desktop, LM Studio
and Jan use, plus Tailor's `disabled`, `timeout`, (Cline's) `alwaysAllow`, and `builtin` (with `root`) for
one of Tailor's own servers in place of a command. Errors name the field and never a value: env values and
headers are secrets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.mcp.builtin.launch import builtin_config, builtin_server
from app.mcp.types import DEFAULT_CALL_TIMEOUT_S, ServerConfig

PLACEHOLDER = "${keyring}"  # what the file holds in place of an env value or a header

SecretLookup = Callable[[str, str, str], str | None]  # (server, "env" | "headers", key) -> value


class EntryError(ValueError):
    """A field of an entry that cannot be used: the message is `field: why`."""


def parse_entry(name: str, entry: Any, secret: SecretLookup | None) -> ServerConfig:
    """The ServerConfig of one `mcpServers` entry; placeholders are looked up with `secret` (None: a file
    of another app, where a placeholder is not ours and is refused)."""
    if not name.strip():
        raise EntryError("the server's name is empty")
    if not isinstance(entry, dict):
        raise EntryError(f"must be an object, not {_kind(entry)}")
    command = _optional(entry, "command", str)
    url = _optional(entry, "url", str)
    builtin = _optional(entry, "builtin", str)
    if builtin is not None and (command is not None or url is not None):
        raise EntryError("has a `builtin` and a `command` or `url`; keep one")
    if command is None and url is None and builtin is None:
        raise EntryError("needs a `command` (a program to run) or a `url`")
    if command is not None and url is not None:
        raise EntryError("has both a `command` and a `url`; keep one")
    if command is not None and not command.strip():
        raise EntryError("command: is empty")
    if url is not None and not url.startswith(("http://", "https://")):
        raise EntryError("url: must start with http:// or https://")
    disabled = _optional(entry, "disabled", bool)
    if disabled is None and _optional(entry, "active", bool) is False:  # Jan's switch
        disabled = True
    timeout = entry.get("timeout", DEFAULT_CALL_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise EntryError("timeout: must be a positive number of seconds")
    settings = dict(env=_secrets(name, entry, "env", secret), enabled=not disabled, timeout_s=float(timeout),
                    always_allow=tuple(_strings(entry, "alwaysAllow")))
    if builtin is not None:
        try:
            server = builtin_server(builtin, _optional(entry, "root", str))
        except ValueError as exc:
            raise EntryError(f"builtin: {exc}") from None
        return builtin_config(name, server, **settings)
    return ServerConfig(name=name, command=command, args=tuple(_strings(entry, "args")), url=url,
                        headers=_secrets(name, entry, "headers", secret), **settings)


def entry_of(config: ServerConfig, old: Any = None) -> dict[str, Any]:
    """The JSON entry of `config`, secrets as placeholders, keeping the keys of `old` Tailor does not know."""
    # `root` is Tailor's only where `builtin` is: another app's key of that name is kept.
    known = (*KNOWN_KEYS, "root") if isinstance(old, dict) and "builtin" in old else KNOWN_KEYS
    entry = {k: v for k, v in old.items() if k not in known} if isinstance(old, dict) else {}
    if config.builtin:
        entry["builtin"] = config.builtin.kind
        if config.builtin.root:
            entry["root"] = config.builtin.root
        if config.env:
            entry["env"] = {k: PLACEHOLDER for k in config.env}
    elif config.command:
        entry["command"] = config.command
        entry["args"] = list(config.args)
        if config.env:
            entry["env"] = {k: PLACEHOLDER for k in config.env}
    else:
        entry["url"] = config.url
        if config.headers:
            entry["headers"] = {k: PLACEHOLDER for k in config.headers}
    if not config.enabled:
        entry["disabled"] = True
    if config.timeout_s != DEFAULT_CALL_TIMEOUT_S:
        entry["timeout"] = config.timeout_s
    if config.always_allow:
        entry["alwaysAllow"] = list(config.always_allow)
    return entry


KNOWN_KEYS = ("command", "args", "env", "url", "headers", "disabled", "timeout", "alwaysAllow", "active", "builtin")


def _optional(entry: dict, key: str, kind: type) -> Any:
    value = entry.get(key)
    if value is not None and not isinstance(value, kind):
        raise EntryError(f"{key}: must be {_name(kind)}, not {_kind(value)}")
    return value


def _strings(entry: dict, key: str) -> list[str]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise EntryError(f"{key}: must be a list of strings")
    return value


def _secrets(name: str, entry: dict, key: str, secret: SecretLookup | None) -> dict[str, str]:
    value = entry.get(key, {})
    if not isinstance(value, dict):
        raise EntryError(f"{key}: must be an object of names to strings, not {_kind(value)}")
    out = {}
    for k, v in value.items():
        if not isinstance(v, str):
            raise EntryError(f"{key}.{k}: must be a string, not {_kind(v)}")
        if v == PLACEHOLDER:
            found = secret(name, key, k) if secret is not None else None
            if found is None:
                raise EntryError(f"{key}.{k}: its value is not in the keyring any more; set it again")
            v = found
        out[k] = v
    return out


def _name(kind: type) -> str:
    return {str: "a string", bool: "true or false"}.get(kind, kind.__name__)


def _kind(value: Any) -> str:
    """What a JSON value is, never the value itself (it may be a secret)."""
    return {dict: "an object", list: "a list", str: "a string", bool: "true or false", type(None): "null"}.get(
        type(value), "a number")
