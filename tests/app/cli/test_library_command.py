"""`tailor ls` and `tailor rm` over a real cache folder and a real data folder."""

from __future__ import annotations

import argparse
import hashlib
import io
import json
from pathlib import Path

import pytest

from app.cli.library import add_library_parsers
from models.hub.cache import link_blob, write_ref
from models.library import ModelStore

COMMIT = "c" * 40


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    repo = cache / "models--org--tiny-GGUF"
    data = b"GGUF" + b"t" * 2000
    blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
    blob.parent.mkdir(parents=True)
    blob.write_bytes(data)
    link_blob(blob, repo / "snapshots" / COMMIT / "tiny.Q4_K_M.gguf")
    write_ref(repo, "main", COMMIT)
    return cache


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tailor")
    add_library_parsers(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_ls_text_and_json(cache, capsys):
    assert _run(["ls"]) == 0
    out = capsys.readouterr().out
    assert "org/tiny-GGUF" in out and "tiny.Q4_K_M.gguf" in out and "Total: 2.0 KB" in out
    assert _run(["ls", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["total_size"] == 2004
    (repo,) = data["repos"]
    assert repo["repo_id"] == "org/tiny-GGUF" and repo["complete"]
    assert repo["revisions"][0]["files"][0] == {
        "name": "tiny.Q4_K_M.gguf", "size": 2004, "gguf": True,
        "path": str(cache / "models--org--tiny-GGUF" / "snapshots" / COMMIT / "tiny.Q4_K_M.gguf")}


def test_ls_with_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    assert _run(["ls"]) == 0
    assert capsys.readouterr().out.strip() == "No local models."


def test_rm_asks_and_does_nothing_without_y(cache, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    assert _run(["rm", "org/tiny-GGUF"]) == 1
    assert "Delete org/tiny-GGUF" in capsys.readouterr().out
    assert (cache / "models--org--tiny-GGUF").exists()
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # end of input: no
    assert _run(["rm", "org/tiny-GGUF"]) == 1
    assert (cache / "models--org--tiny-GGUF").exists()


def test_rm_with_y_or_yes_deletes(cache, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    assert _run(["rm", "org/tiny-GGUF"]) == 0
    assert not (cache / "models--org--tiny-GGUF").exists()
    assert "Deleted org/tiny-GGUF" in capsys.readouterr().out


def test_rm_a_file_path_and_an_imported_file(cache, tmp_path, capsys):
    snapshot_file = cache / "models--org--tiny-GGUF" / "snapshots" / COMMIT / "tiny.Q4_K_M.gguf"
    assert _run(["rm", str(snapshot_file), "--yes"]) == 0
    assert not snapshot_file.exists()
    mine = tmp_path / "mine.gguf"
    mine.write_bytes(b"GGUF" + b"m" * 10)
    from app.services.paths import AppPaths

    ModelStore(AppPaths.default().data_dir).import_gguf(mine)
    assert _run(["rm", str(mine), "--yes"]) == 0
    assert mine.exists() and "Forgot imported file" in capsys.readouterr().out
    assert ModelStore(AppPaths.default().data_dir).list().imported == ()


def test_rm_unknown_model(cache, capsys):
    assert _run(["rm", "org/none", "--yes"]) == 1
    assert "no local model named 'org/none'" in capsys.readouterr().err
