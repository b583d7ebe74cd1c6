"""`tailor serve` refuses settings that would expose the model by accident."""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
import pytest

from app.cli.main import main
from app.server.config import DEFAULT_PORT, ServerConfig, ServerConfigError


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_loopback_needs_nothing(host: str):
    ServerConfig(host=host).check()


def test_other_addresses_need_the_flag_and_a_key():
    with pytest.raises(ServerConfigError, match="--allow-remote"):
        ServerConfig(host="0.0.0.0", api_key="k").check()
    with pytest.raises(ServerConfigError, match="--api-key"):
        ServerConfig(host="0.0.0.0", allow_remote=True).check()
    ServerConfig(host="0.0.0.0", allow_remote=True, api_key="k").check()


@pytest.mark.parametrize("key", ["s3cret", "clé-Schlüssel", "with inner spaces", "ключ!@#$%^&*()"])
def test_keys_a_header_can_carry_are_accepted(key: str):
    ServerConfig(api_key=key).check()


def test_wildcard_bind_accepts_this_machines_names_only():
    names = ServerConfig(host="0.0.0.0", allow_remote=True, api_key="k", allow_hosts=("tailor.lan",)).host_names()
    assert {"localhost", "127.0.0.1", "tailor.lan"} <= names
    assert "attacker.example" not in names


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["serve", "--host", "0.0.0.0"], "--allow-remote"),
        (["serve", "--host", "0.0.0.0", "--allow-remote"], "--api-key"),
        (["serve", "--port", "70000"], "out of range"),
        (["serve", "--ctx", "0"], "--ctx"),
        (["serve", "--parallel", "0"], "--parallel must be 1 to 64 replies at once, not 0"),
        (["serve", "--parallel", "10000"], "--parallel must be 1 to 64 replies at once, not 10000"),
        (["serve", "--queue-timeout", "0"], "--queue-timeout must be a positive number of seconds"),
        (["serve", "--api-key", ""], "empty"),
        (["serve", "--api-key", " s3cret"], "space"),
        (["serve", "--api-key", "s3cret\n"], "control character"),
        (["serve", "--api-key", "s3\ncret"], "control character"),
        (["serve", "--api-key", "s3\x00cret"], "control character"),
    ],
)
def test_cli_refuses_with_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]):
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("tailor: error:") and message in err and "\n" not in err


def test_cli_reports_a_bad_model_file(not_a_model, capsys: pytest.CaptureFixture[str]):
    assert main(["serve", "--model", str(not_a_model), "--port", "0"]) == 1
    assert "tailor: error:" in capsys.readouterr().err


@contextmanager
def serve_process(args: list[str], home: Path) -> Iterator[tuple[subprocess.Popen, str]]:
    """`tailor serve ARGS` in its own process, once it says where it serves; Ctrl+C at the end (exit 0)."""
    env = {**os.environ, "TAILOR_HOME": str(home)}
    process = subprocess.Popen(
        [sys.executable, "-m", "app.launcher", "serve", *args], stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        url = None
        for line in process.stderr:  # type: ignore[union-attr]
            if "serving on " in line:
                url = line.split("serving on ", 1)[1].split()[0]
                break
        assert url is not None, "the command never said where it serves"
        yield process, url
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0


def test_serve_command_serves_until_interrupted(starter_model: Path, tmp_path: Path):
    """The real command in its own process: loads, prints its address, answers, stops on Ctrl+C."""
    with serve_process(["--port", "0", "--ctx", "1024", "--api-key", "k"], tmp_path) as (_, url):
        models = httpx.get(f"{url}/models", headers={"Authorization": "Bearer k"}, timeout=30).json()
        assert models["data"][0]["id"] == starter_model.stem


def _port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _other_addresses() -> list[str]:
    """This machine's own addresses that are not loopback (link-local IPv6 left out: it needs a scope)."""
    found = []
    for addresses in psutil.net_if_addrs().values():
        for a in addresses:
            if a.family in (socket.AF_INET, socket.AF_INET6):
                ip = ipaddress.ip_address(a.address.split("%")[0])
                if not ip.is_loopback and not ip.is_link_local:
                    found.append(str(ip))
    return found


def test_serve_binds_127_0_0_1_port_8080_by_default_and_nothing_else(starter_model: Path, tmp_path: Path):
    """The README's promise, with no options at all: listening on 127.0.0.1:8080 only."""
    if not _port_is_free(DEFAULT_PORT):
        pytest.skip(f"port {DEFAULT_PORT} is taken on this machine by something else")
    with serve_process([], tmp_path) as (process, url):
        assert url == "http://127.0.0.1:8080/v1"
        listening = {
            (c.laddr.ip, c.laddr.port)
            for c in psutil.Process(process.pid).net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
        }
        assert listening == {("127.0.0.1", 8080)}
        assert httpx.get(f"{url}/models", timeout=30).json()["data"][0]["id"] == starter_model.stem
        for address in _other_addresses():
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            with socket.socket(family) as sock, pytest.raises(ConnectionRefusedError):
                sock.settimeout(10)
                sock.connect((address, 8080))
