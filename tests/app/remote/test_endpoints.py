"""Saved endpoints: a JSON list in the data folder, keys in the keyring or a file only the user reads."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from app.remote.endpoints import NO_KEYRING, EndpointError, EndpointStore, KeyStore
from app.services.paths import AppPaths


class MemoryKeyring:
    """A keyring backend in memory: stands in for the desktop's Secret Service, absent here.

    Not a keyring.backend.KeyringBackend subclass: those register themselves with keyring
    and would become every later test's system keyring.
    """

    def __init__(self) -> None:
        self.secrets: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.secrets.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.secrets[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.secrets.pop((service, username), None)


def test_keys_go_to_a_private_file_without_a_keyring(tmp_path: Path):
    paths = AppPaths.default()
    store = EndpointStore(paths, KeyStore(paths.data_dir / "endpoint-keys.json", backend=NO_KEYRING))
    store.add("cluster", "gpu-box:8000", "meta-llama/Llama-3.1-70B-Instruct", api_key="sk-secret")
    saved = store.get("cluster")
    assert saved is not None and saved.url == "http://gpu-box:8000/v1"
    assert "sk-secret" not in store.file.read_text()  # the list never holds a key
    key_file = paths.data_dir / "endpoint-keys.json"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert json.loads(key_file.read_text()) == {"cluster": "sk-secret"}
    endpoint = EndpointStore(paths, KeyStore(key_file, backend=NO_KEYRING)).endpoint("cluster")  # read back anew
    assert endpoint is not None and endpoint.api_key == "sk-secret" and endpoint.model.endswith("70B-Instruct")
    assert store.key_for_url("http://gpu-box:8000") == "sk-secret"
    store.remove("cluster")
    assert store.list() == [] and json.loads(key_file.read_text()) == {}


def test_keys_go_to_the_keyring_when_it_is_usable(tmp_path: Path):
    paths = AppPaths.default()
    keyring = MemoryKeyring()
    store = EndpointStore(paths, KeyStore(paths.data_dir / "endpoint-keys.json", backend=keyring))
    store.add("vllm", "https://llm.example.org/v1", "qwen", api_key="k1")
    assert list(keyring.secrets.values()) == ["k1"]
    assert not (paths.data_dir / "endpoint-keys.json").exists()
    assert store.endpoint("vllm").api_key == "k1"
    store.remove("vllm")
    assert keyring.secrets == {}


@pytest.fixture
def system_keyring():
    """Sets the `keyring` package's backend for one test (what a desktop would give), then puts
    back the one it had: the tests do not depend on what this machine has."""
    import keyring

    before = keyring.get_keyring()  # detected now, before any backend class a test defines
    yield keyring.set_keyring
    keyring.set_keyring(before)


@pytest.mark.parametrize("kind", ["fail", "null"])
def test_a_machine_without_a_usable_keyring_uses_the_file(system_keyring, kind: str):
    # keyring's choice on a headless Linux is its "fail" backend; "null" is the one that disables it.
    from keyring.backends import fail, null

    system_keyring(fail.Keyring() if kind == "fail" else null.Keyring())
    assert KeyStore(Path("unused")).backend is None


def test_a_usable_system_keyring_is_taken(system_keyring, tmp_path: Path):
    from keyring.backend import KeyringBackend

    class DesktopKeyring(KeyringBackend):  # as the Secret Service backend is on a desktop
        priority = 5  # type: ignore[assignment]
        get_password = MemoryKeyring.get_password
        set_password = MemoryKeyring.set_password
        delete_password = MemoryKeyring.delete_password

    desktop = DesktopKeyring()
    desktop.secrets = {}
    system_keyring(desktop)
    keys = KeyStore(tmp_path / "keys.json")
    assert keys.backend is desktop
    store = EndpointStore(AppPaths.default(), keys)
    store.add("box", "localhost:8000", "m", api_key="k9")
    assert desktop.secrets and not (tmp_path / "keys.json").exists()


def test_replacing_and_bad_entries(tmp_path: Path):
    store = EndpointStore(AppPaths.default(), KeyStore(tmp_path / "keys.json", backend=NO_KEYRING))
    store.add("a", "localhost:8080", "m1")
    store.add("a", "localhost:9090", "m2")
    assert [(e.name, e.url, e.model) for e in store.list()] == [("a", "http://localhost:9090/v1", "m2")]
    for name, url, model in (("", "localhost", "m"), ("b", "localhost", " "), ("c", "ftp://host", "m")):
        with pytest.raises(EndpointError):
            store.add(name, url, model)
    store.file.write_text("{ not json")
    assert store.list() == []  # a damaged list reads as empty, never a crash
