"""`tailor pull`, `tailor ls`: the installed command against the fake hub."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import build_parser
from app.cli.pull import run_pull
from models.hardware.profile import profile_for
from tests.fixtures import fake_hub as hub_fixtures
from tests.fixtures import hub_repos
from tests.fixtures.fake_hub import FakeHub

TAILOR = str(Path(sys.executable).with_name("tailor"))
fake_hub = hub_fixtures.fake_hub
tiny_quants = hub_repos.tiny_quants
REPO = "org/Tiny-GGUF"


def tailor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TAILOR, *args], capture_output=True, text=True, timeout=120, env=dict(os.environ))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_pull_a_quant_level_verifies_it_and_prints_the_path_last(fake_hub: FakeHub, tiny_quants: dict[str, Path]):
    fake_hub.add_repo(REPO, hub_repos.gguf_repo_files(tiny_quants), tags=["gguf"])
    result = tailor("pull", REPO, "--quant", "q8_0")
    assert result.returncode == 0, result.stderr
    local = Path(result.stdout.strip().splitlines()[-1])
    assert local.name == "Tiny-Llama-Q8_0.gguf" and local.is_file()
    assert sha256(local) == sha256(tiny_quants["Q8_0"])
    assert str(Path(os.environ["HF_HOME"])) in str(local)  # in the standard cache
    listed = json.loads(tailor("ls", "--json").stdout)
    assert REPO in json.dumps(listed)


@pytest.mark.parametrize(("machine", "quant"), [("no GPU", "Q4_K_M"), ("RTX 4090", "F16")])
def test_pull_without_a_choice_takes_the_plans_file_for_the_machine(
        fake_hub: FakeHub, tiny_quants: dict[str, Path], capsys: pytest.CaptureFixture[str], machine: str,
        quant: str):
    fake_hub.add_repo(REPO, hub_repos.gguf_repo_files(tiny_quants), tags=["gguf"])
    # The machine is handed in, as the planner's hardware profile: not whatever this one has.
    profile = profile_for(ram_gib=16) if machine == "no GPU" else profile_for(machine, ram_gib=64)
    code = run_pull(build_parser().parse_args(["pull", REPO]), profile=profile)
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.strip().endswith(f"Tiny-Llama-{quant}.gguf")  # without a GPU the CPU default; else the best that fits
    assert f"Plan: {quant}" in err


def test_corrupted_bytes_fail_the_pull_and_leave_no_model(fake_hub: FakeHub, tiny_quants: dict[str, Path]):
    fake_hub.add_repo(REPO, hub_repos.gguf_repo_files(tiny_quants), tags=["gguf"])
    fake_hub.fault(REPO, "Tiny-Llama-Q8_0.gguf", corrupt=True)
    result = tailor("pull", REPO, "--quant", "Q8_0")
    assert result.returncode == 1 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Tiny-Llama-Q8_0.gguf" in lines[0] and "sha256" in lines[0].lower()
    assert not list(Path(os.environ["HF_HOME"]).rglob("Tiny-Llama-Q8_0.gguf"))


def test_what_the_repo_does_not_have_is_one_line(fake_hub: FakeHub, tiny_quants: dict[str, Path]):
    fake_hub.add_repo(REPO, hub_repos.gguf_repo_files(tiny_quants), tags=["gguf"])
    for args, words in (
        (("pull", "org/Nope"), "org/Nope"),
        (("pull", REPO, "--quant", "Q2_K"), "no Q2_K file"),
        (("pull", REPO, "--file", "nope.gguf"), "no file nope.gguf"),
    ):
        result = tailor(*args)
        assert result.returncode == 1, args
        assert result.stderr.count("\n") == 1 and words in result.stderr and "Traceback" not in result.stderr


def assert_one_line_error(result: subprocess.CompletedProcess[str], *words: str) -> str:
    """Exit 1, nothing on stdout, one line on stderr holding `words`; that line."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    line = result.stderr.strip()
    assert line.startswith("tailor: error: ") and all(w in line for w in words), line
    return line


def _no_model_files() -> list[Path]:
    return [p for p in Path(os.environ["HF_HOME"]).rglob("*.gguf*") if p.is_file()]


def test_a_gated_repo_is_one_line_and_nothing_is_kept(fake_hub: FakeHub, tiny_quants: dict[str, Path]):
    fake_hub.add_repo("org/Gated-GGUF", hub_repos.gguf_repo_files(tiny_quants), tags=["gguf"], gated="manual")
    for args in (("--quant", "Q4_K_M"), ()):  # a chosen file, and the plan's (which reads headers first)
        line = assert_one_line_error(tailor("pull", "org/Gated-GGUF", *args), "gated")
        assert "log in" in line  # what to do about it
    assert _no_model_files() == []


def test_offline_is_one_line_without_touching_the_network(fake_hub: FakeHub, tiny_quants: dict[str, Path],
                                                          monkeypatch: pytest.MonkeyPatch):
    fake_hub.add_repo(REPO, hub_repos.gguf_repo_files(tiny_quants), tags=["gguf"])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert_one_line_error(tailor("pull", REPO), REPO, "offline")
    assert fake_hub.requests == []


def test_an_unreachable_hub_is_one_line(fake_hub: FakeHub):
    fake_hub.stop()
    assert_one_line_error(tailor("pull", REPO), REPO, "cannot reach the hub")


def _small_disk() -> None:
    """In the child, before exec: files may not grow past 4 MiB (EFBIG, as a full disk's ENOSPC)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills the writer
    resource.setrlimit(resource.RLIMIT_FSIZE, (4 << 20, 4 << 20))


def test_a_disk_that_fills_up_is_one_line_and_removes_the_partial(fake_hub: FakeHub, tiny_quants: dict[str, Path]):
    fake_hub.add_repo(REPO, hub_repos.gguf_repo_files(tiny_quants), tags=["gguf"])
    result = subprocess.run([TAILOR, "pull", REPO, "--quant", "Q4_K_M"], capture_output=True, text=True, timeout=120,
                            env=dict(os.environ), preexec_fn=_small_disk)
    assert_one_line_error(result, "disk full", "Tiny-Llama-Q4_K_M.gguf")
    assert _no_model_files() == [] and not list(Path(os.environ["HF_HOME"]).rglob("*.incomplete"))


def test_too_little_free_space_is_one_line_before_any_byte(fake_hub: FakeHub):
    repo = fake_hub.add_repo("org/Huge-GGUF", {"Huge-Q4_K_M.gguf": b"GGUF" + bytes(60)}, tags=["gguf"])
    small = repo.files["Huge-Q4_K_M.gguf"]
    repo.files[small.path] = dataclasses.replace(small, size=1 << 50)  # the hub lists a 1 PiB file
    assert_one_line_error(tailor("pull", "org/Huge-GGUF", "--quant", "Q4_K_M"), "not enough free space", "free")
    assert fake_hub.count_requests("GET", "/cdn/") == 0


def test_a_refused_file_name_is_one_line_before_any_download(fake_hub: FakeHub):
    fake_hub.add_repo("org/Evil-GGUF", {"ok-Q4_K_M.gguf": b"GGUF" + bytes(60)}, tags=["gguf"],
                      evil_entries=["../../evil.gguf"])
    assert_one_line_error(tailor("pull", "org/Evil-GGUF", "--quant", "Q4_K_M"), "refused", "../../evil.gguf")
    assert fake_hub.count_requests(contains="/resolve/") == 0 and fake_hub.count_requests(contains="/cdn/") == 0
    assert not (Path(os.environ["HF_HOME"]).parent / "evil.gguf").exists()


QWEN = "Qwen/Qwen2.5-7B-Instruct-GGUF"
QWEN_DRAFT = "Qwen/Qwen2.5-0.5B-Instruct-GGUF"


@pytest.fixture
def qwen_hub(fake_hub: FakeHub, tiny_quants: dict[str, Path], starter_model: Path, tmp_path: Path) -> FakeHub:
    """A family with a draft on the hub: its small model shares the tokenizer (a quarter of the weights or less)."""
    from tests.fixtures.tiny_gguf import TinySpec, borrow_tokenizer, write_tiny_llama

    small = write_tiny_llama(tmp_path / "small.gguf", TinySpec(n_layers=1, n_embd=32, n_heads=1, n_kv_heads=1,
                                                               n_ff=64, tied_output=True), borrow_tokenizer(starter_model))
    fake_hub.add_repo(QWEN, hub_repos.gguf_repo_files(tiny_quants, stem="qwen2.5-7b-instruct"), tags=["gguf"])
    fake_hub.add_repo(QWEN_DRAFT, {"qwen2.5-0.5b-instruct-q8_0.gguf": small, "qwen2.5-0.5b-instruct-fp16.gguf": small},
                      tags=["gguf"])
    return fake_hub


def test_pull_suggests_the_familys_draft_model(qwen_hub: FakeHub):
    result = tailor("pull", QWEN, "--quant", "q8_0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1].endswith("qwen2.5-7b-instruct-Q8_0.gguf")
    assert (f"tailor: {QWEN_DRAFT} (Qwen2.5, the same tokenizer) can draft for it and speed up its replies "
            f"(speculative decoding): tailor pull {QWEN_DRAFT} --quant Q8_0, or pull with --with-draft") in result.stderr
    # A model of no family we know, or one that is a draft itself: no suggestion
    small = tailor("pull", QWEN_DRAFT, "--quant", "q8_0")
    assert small.returncode == 0 and "can draft for it" not in small.stderr


def test_pull_with_draft_fetches_both_and_auto_finds_the_draft_in_the_library(qwen_hub: FakeHub):
    result = tailor("pull", QWEN, "--quant", "q8_0", "--with-draft")
    assert result.returncode == 0, result.stderr
    *before, model = result.stdout.strip().splitlines()
    assert model.endswith("qwen2.5-7b-instruct-Q8_0.gguf") and Path(model).is_file()  # the model's path is last
    assert before[-1].endswith("qwen2.5-0.5b-instruct-q8_0.gguf") and Path(before[-1]).is_file()
    again = tailor("pull", QWEN, "--quant", "q8_0")
    assert "tailor: speculative decoding: Auto drafts for it with qwen2.5-0.5b-instruct-q8_0.gguf from your library" \
        in again.stderr
