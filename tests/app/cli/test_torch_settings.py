"""`tailor chat` with the PyTorch engine's settings: --speculative, --draft, --gpu-memory-fraction."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.services.load_settings import LoadSettings
from app.services.planning.load_planner import LoadPlanner
from models.plan.load_options import SpeculativeOptions, TorchOptions
from tests.app.cli.test_chat_command import tailor
from tests.fixtures.tiny_hf import write_tiny_model


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny chat model and a draft: the same model, so every draft is accepted."""
    target = tmp_path_factory.mktemp("chat-target")
    write_tiny_model(target, "qwen2")
    draft = tmp_path_factory.mktemp("chat-draft")
    for f in target.iterdir():
        shutil.copy(f, draft / f.name)
    return target, draft


def test_settings_reach_the_load_request(folders: tuple[Path, Path]) -> None:
    target, draft = folders
    options = TorchOptions(gpu_memory_fraction=0.5, cpu_kv_bytes=1 << 24)
    speculation = SpeculativeOptions(mode="draft", draft_path=str(draft))
    request = LoadPlanner().plan_load(str(target), LoadSettings(256, speculation=speculation, torch=options)).request
    assert (request.torch.gpu_memory_fraction, request.speculation.mode, request.speculation.draft_path,
            request.torch.cpu_kv_bytes) == (0.5, "draft", str(draft), 1 << 24)
    default = LoadPlanner().plan_load(str(target), LoadSettings(256)).request
    assert (default.torch.gpu_memory_fraction, default.speculation.mode, default.speculation.draft_path) == (
        0.9, "auto", None)


def test_chat_with_a_draft_model_reports_its_acceptance(folders: tuple[Path, Path], tmp_path: Path) -> None:
    target, draft = folders
    result = tailor("chat", "--model", str(target), "--draft", str(draft), "--gpu-memory-fraction", "0.5",
                    "--json", "--temperature", "0", "--max-tokens", "12", "Hello there", home=tmp_path)
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout.rstrip("\n").split("\n")[-1])
    assert stats["draft_acceptance"] > 0.9  # the draft is the model itself


def test_chat_with_speculation_off_reports_no_drafts(folders: tuple[Path, Path], tmp_path: Path) -> None:
    result = tailor("chat", "--model", str(folders[0]), "--speculative", "off", "--json", "--temperature", "0",
                    "--max-tokens", "8", "Hello there", home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "draft_acceptance" not in json.loads(result.stdout.rstrip("\n").split("\n")[-1])


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--speculative", "draft"], 1, "--speculative draft needs --draft DIR"),
        (["--speculative", "lookup", "--draft", "/tmp"], 1, "--draft needs --speculative draft"),
        (["--gpu-memory-fraction", "1.5"], 2, "must be above 0 and at most 1"),
        (["--gpu-memory-fraction", "lots"], 2, "invalid _fraction value"),
        (["--speculative", "medusa"], 2, "invalid choice: 'medusa'"),
    ],
)
def test_bad_speculation_options_are_one_line(args: list[str], code: int, message: str, tmp_path: Path) -> None:
    result = tailor("chat", "--model", str(tmp_path), *args, "hi", home=tmp_path)
    assert result.returncode == code and message in result.stderr
    assert "Traceback" not in result.stderr


def test_draft_that_is_not_a_model_is_one_line(folders: tuple[Path, Path], tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = tailor("chat", "--model", str(folders[0]), "--draft", str(tmp_path / "empty"), "hi", home=tmp_path)
    assert result.returncode == 1 and result.stderr.startswith("tailor: error: The draft model empty")
    assert len(result.stderr.strip().splitlines()) == 1
