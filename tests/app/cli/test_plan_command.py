"""`tailor plan`, run as the installed command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.fixtures import fake_hub as hub_fixtures
from tests.fixtures import hub_repos
from tests.fixtures.fake_hub import FakeHub

TAILOR = str(Path(sys.executable).with_name("tailor"))


def plan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TAILOR, "plan", *args], capture_output=True, text=True, timeout=60)


def test_plan_for_the_starter_model_on_this_machine(starter_model: Path):
    result = plan("--file", str(starter_model), "--json", "--ctx", "4096")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    assert d["fits"] is True and d["format"] == "gguf" and d["quant"] == "Q4_1"
    assert d["n_layers"] == 30 and d["context"] == 4096 and d["kv_type"] == "f16"
    f = d["forecast"]
    assert f["total_bytes"] == f["weights_bytes"] + f["kv_cache_bytes"] + f["compute_bytes"] + f["overhead_bytes"] + f["projector_bytes"]
    assert f["kv_cache_bytes"] == 30 * 4096 * 192 * 2 * 2
    assert d["reasons"]


def test_plan_for_another_machine_offloads_everything(starter_model: Path):
    result = plan("--file", str(starter_model), "--json", "--gpu-name", "RTX 4090", "--kv", "q8_0", "--ctx", "8192")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    assert d["n_gpu_layers"] == d["n_layers"] + 1
    assert set(d["forecast"]["devices"]) == {"cpu", "cuda:0"}
    assert "RTX 4090" in d["reasons"][0] and "8.9" in d["reasons"][0]
    assert not any("trained for" in r for r in d["reasons"])  # 8,192 is within its training


def test_human_output_lists_the_reasons(starter_model: Path):
    result = plan("--file", str(starter_model))
    assert result.returncode == 0
    assert result.stdout.startswith("Fits: GGUF Q4_1") and "Why:" in result.stdout
    assert "  parallel replies: up to 4 at once share these " in result.stdout


def test_bad_file_is_one_line_and_nonzero(truncated_model: Path, not_a_model: Path):
    for path in (truncated_model, not_a_model):
        result = plan("--file", str(path))
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tailor: error: ") and path.name in lines[0]


def test_unknown_gpu_without_memory_is_a_clear_error(starter_model: Path):
    result = plan("--file", str(starter_model), "--gpu-name", "Voodoo 5")
    assert result.returncode == 1 and "tailor: error:" in result.stderr and "Traceback" not in result.stderr


# -- tailor plan --repo, against the fake hub ---------------------------------------------------------

fake_hub = hub_fixtures.fake_hub
tiny_quants = hub_repos.tiny_quants


def test_plan_for_a_gguf_repo_reads_one_header(fake_hub: FakeHub, tiny_quants: dict[str, Path]):
    fake_hub.add_repo("org/Tiny-GGUF", hub_repos.gguf_repo_files(tiny_quants), tags=["gguf"])
    result = plan("--repo", "org/Tiny-GGUF", "--json", "--gpu-name", "RTX 4090")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    assert d["format"] == "gguf" and d["quant"] == "F16" and d["files"] == ["Tiny-Llama-F16.gguf"]
    assert d["n_layers"] == hub_repos.TINY_SPEC.n_layers
    # one header, read with Range requests from the CDN the hub redirects to; no whole file sent
    assert fake_hub.bytes_sent < tiny_quants["Q4_K_M"].stat().st_size
    assert fake_hub.count_requests("GET", "/cdn/") >= 1
    assert fake_hub.count_requests("GET", "Q4_K_M.gguf") >= 1  # the smallest file's header
    assert fake_hub.count_requests(contains="F16.gguf") == 0


def test_plan_for_a_gguf_repo_on_a_cpu_picks_the_cpu_default(fake_hub: FakeHub,
                                                                  tiny_quants: dict[str, Path]):
    fake_hub.add_repo("org/Tiny-GGUF", hub_repos.gguf_repo_files(tiny_quants), tags=["gguf"])
    result = plan("--repo", "org/Tiny-GGUF", "--json", "--ram", "64")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    assert d["format"] == "gguf" and d["n_gpu_layers"] == 0 and d["quant"] == "Q4_K_M"


def test_plan_for_a_split_only_repo_lists_every_part(fake_hub: FakeHub, tiny_quants: dict[str, Path]):
    fake_hub.add_repo("org/Tiny-Split", hub_repos.split_repo_files(tiny_quants["Q8_0"]))
    result = plan("--repo", "org/Tiny-Split", "--json", "--gpu-name", "RTX 4090")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    assert d["quant"] == "Q8_0" and d["files"] == [f"Tiny-Llama-Q8_0-0000{i}-of-00003.gguf" for i in (1, 2, 3)]


def test_plan_for_an_awq_repo(fake_hub: FakeHub):
    files = hub_repos.awq_repo_files()
    fake_hub.add_repo("org/Tiny-AWQ", files, tags=["awq"])
    result = plan("--repo", "org/Tiny-AWQ", "--json", "--gpu-name", "RTX 4090")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    assert d["format"] == "awq" and d["n_layers"] == 22
    assert d["files"] == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]


def test_plan_for_gptq_and_fp8_repos(fake_hub: FakeHub):
    """Once "not supported by the engine": each is planned on the PyTorch engine, with its forecast."""
    from tests.fixtures.hub_repos import AWQ_CONFIG

    gptq = {**AWQ_CONFIG, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128,
                                                  "desc_act": True, "sym": True}}
    fp8 = {**AWQ_CONFIG, "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    fake_hub.add_repo("org/Tiny-GPTQ", hub_repos.awq_repo_files(gptq), tags=["gptq"])
    fake_hub.add_repo("org/Tiny-FP8", hub_repos.awq_repo_files(fp8), tags=["fp8"])
    for repo, gpu, expected in (("org/Tiny-GPTQ", "RTX 4090", "gptq"), ("org/Tiny-FP8", "H100", "fp8")):
        result = plan("--repo", repo, "--json", "--gpu-name", gpu)
        assert result.returncode == 0, result.stderr
        d = json.loads(result.stdout)
        assert d["format"] == expected and d["fits"] and d["forecast"]["devices"], d
        assert any(f"The whole {expected.upper()} model fits in VRAM" in r for r in d["reasons"])


def test_plan_for_a_missing_repo_is_one_line(fake_hub: FakeHub):
    result = plan("--repo", "org/Nope", "--json")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "org/Nope" in result.stderr and "no such repo" in result.stderr


def test_plan_for_a_gated_repo_without_a_token(fake_hub: FakeHub, tiny_quants: dict[str, Path]):
    fake_hub.add_repo("org/Gated", {"m-Q8_0.gguf": tiny_quants["Q8_0"]}, gated="auto")
    result = plan("--repo", "org/Gated")
    assert result.returncode == 1 and "gated" in result.stderr and result.stderr.count("\n") == 1


def test_the_plan_says_how_parallel_replies_share_the_context():
    from app.services.planning.plan_text import parallel_text

    assert parallel_text(8192, 4) == (
        "parallel replies: up to 4 at once share these 8,192 tokens of KV cache (4 x 2,048 or 2 x 4,096 or "
        "1 x 8,192 tokens); sliding-window and recurrent models run one at a time")
    assert "(3 x 1,365 or 2 x 2,048 or 1 x 4,096 tokens)" in parallel_text(4096, 3)
