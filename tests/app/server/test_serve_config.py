"""`tailor serve` refuses settings that would expose the model by accident."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from app.server.config import ServerConfig, ServerConfigError


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_loopback_needs_nothing(host: str):
    ServerConfig(host=host).check()


def test_other_addresses_need_the_flag_and_a_key():
    with pytest.raises(ServerConfigError, match="--allow-remote"):
        ServerConfig(host="0.0.0.0", api_key="k").check()
    with pytest.raises(ServerConfigError, match="--api-key"):
        ServerConfig(host="0.0.0.0", allow_remote=True).check()
    ServerConfig(host="0.0.0.0", allow_remote=True, api_key="k").check()


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
    ],
)
def test_cli_refuses_with_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]):
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("tailor: error:") and message in err and "\n" not in err


def test_cli_reports_a_bad_model_file(not_a_model, capsys: pytest.CaptureFixture[str]):
    assert main(["serve", "--model", str(not_a_model), "--port", "0"]) == 1
    assert "tailor: error:" in capsys.readouterr().err


def test_serve_command_serves_until_interrupted(starter_model: Path, tmp_path: Path):
    """The real command in its own process: loads, prints its address, answers, stops on Ctrl+C."""
    import os
    import signal
    import subprocess
    import sys

    import httpx

    env = {**os.environ, "TAILOR_HOME": str(tmp_path)}
    process = subprocess.Popen(
        [sys.executable, "-m", "app.launcher", "serve", "--port", "0", "--ctx", "1024", "--api-key", "k"],
        stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        url = None
        for line in process.stderr:
            if "serving on " in line:
                url = line.split("serving on ", 1)[1].split()[0]
                break
        assert url is not None, "the command never said where it serves"
        models = httpx.get(f"{url}/models", headers={"Authorization": "Bearer k"}, timeout=30).json()
        assert models["data"][0]["id"] == starter_model.stem
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0
