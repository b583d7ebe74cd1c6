"""Grouping a repo's files by quant level, split set, projector and checkpoint."""

from __future__ import annotations

from models.formats.hf_config import hf_config_from_dict
from models.hub.client import RepoFile
from models.hub.repo_files import group_files
from tests.fixtures.hub_repos import AWQ_CONFIG


def _f(path: str, size: int = 100) -> RepoFile:
    return RepoFile(path, size, "a" * 64 if path.endswith((".gguf", ".safetensors")) else None, "b" * 40)


def test_gguf_levels_best_first_projectors_apart() -> None:
    files = [_f("README.md"), _f("m-Q4_K_M.gguf", 40), _f("m-IQ3_XS.gguf", 30), _f("m-F16.gguf", 160),
             _f("m-BF16.gguf", 160), _f("m-Q8_0.gguf", 85), _f("mmproj-m-f16.gguf", 10)]
    groups = group_files(files)
    assert [(g.format, g.quant) for g in groups] == [
        ("gguf", "F16"), ("gguf", "BF16"), ("gguf", "Q8_0"), ("gguf", "Q4_K_M"), ("gguf", "IQ3_XS"),
        ("mmproj", "F16")]
    assert groups[0].paths == ("m-F16.gguf",) and groups[0].total_size == 160
    assert all(g.complete for g in groups)


def test_split_sets_joined_and_incomplete_ones_marked() -> None:
    files = [_f("Q4_K_M/m-Q4_K_M-00002-of-00003.gguf", 10), _f("Q4_K_M/m-Q4_K_M-00001-of-00003.gguf", 10),
             _f("Q4_K_M/m-Q4_K_M-00003-of-00003.gguf", 5), _f("m-Q8_0-00001-of-00002.gguf", 50),
             _f("m-Q2_K.gguf", 7)]
    groups = {g.quant: g for g in group_files(files)}
    q4 = groups["Q4_K_M"]
    assert q4.complete and q4.total_size == 25 and q4.name == "m-Q4_K_M"
    assert q4.paths == tuple(f"Q4_K_M/m-Q4_K_M-0000{i}-of-00003.gguf" for i in (1, 2, 3))
    assert not groups["Q8_0"].complete
    assert groups["Q2_K"].complete


def test_awq_checkpoint_from_config() -> None:
    files = [_f("config.json"), _f("model-00002-of-00002.safetensors", 30), _f("model-00001-of-00002.safetensors", 70)]
    (group,) = group_files(files, hf_config_from_dict("config.json", AWQ_CONFIG))
    assert (group.format, group.quant, group.total_size) == ("awq", "AWQ 4-bit", 100)
    assert group.paths[0].endswith("00001-of-00002.safetensors")


def test_unquantized_and_fp8_checkpoints() -> None:
    files = [_f("model.safetensors")]
    assert group_files(files)[0].format == "safetensors"
    dense = hf_config_from_dict("c", {"torch_dtype": "bfloat16"})
    assert (group_files(files, dense)[0].format, group_files(files, dense)[0].quant) == ("safetensors", "BF16")
    fp8 = hf_config_from_dict("c", {"quantization_config": {"quant_method": "fp8"}})
    assert (group_files(files, fp8)[0].format, group_files(files, fp8)[0].quant) == ("fp8", "FP8 8-bit")
    assert group_files([_f("README.md")]) == []
