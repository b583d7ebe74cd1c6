"""FP8 checkpoints: per-tensor, per-channel and block-wise scales; the CPU upcast; bad scales refused.

The starter model's first two layers are quantized by tests/fixtures/tiny_quant.py as AutoFP8 (a 0-d
weight_scale), compressed-tensors ([1] or [out, 1] weight_scale) and DeepSeek/Qwen (weight_scale_inv
per 128x128 block, quant_method fp8 with weight_block_size) lay them out.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from engine.torch.arch import load_model
from engine.torch.fp8 import FP8, Fp8Linear, Fp8ScaleError, Fp8Weight
from engine.torch.model_config import CheckpointError, ModelConfig
from engine.torch.quant_config import Fp8Config
from tests.engine.torch.reference import greedy_with_logits
from tests.engine.torch.test_gptq import LOGIT_TOLERANCE, PROMPT, _hf_logits
from tests.fixtures.tiny_quant import fp8_quantize, write_fp8_copy

LAYOUTS = {  # layout -> the config the loader reads
    "tensor": Fp8Config(block=None, scale_name="weight_scale"),
    "tensor1": Fp8Config(block=None, scale_name="weight_scale", ignored=("lm_head",)),
    "channel": Fp8Config(block=None, scale_name="weight_scale", ignored=("lm_head",)),
    "block": Fp8Config(block=(128, 128), scale_name="weight_scale_inv"),
}


@pytest.fixture(scope="module")
def dense_hf(starter_two_layers: Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(starter_two_layers, dtype=torch.float32).eval()


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_fp8_checkpoint_upcasts_exactly_on_the_cpu_and_tracks_the_dense_model(
    starter_two_layers: Path, dense_hf, tmp_path: Path, layout: str
) -> None:
    references = write_fp8_copy(starter_two_layers, tmp_path, layout)
    assert ModelConfig.from_dir(tmp_path).quant == LAYOUTS[layout]
    model = load_model(tmp_path).model
    layer, prefix = model.layers[0], "model.layers.0"
    # k_proj and v_proj have 192 rows: the block layout's last block of rows is a short one.
    assert torch.equal(layer.qkv.weight, torch.cat([references[f"{prefix}.self_attn.{p}_proj"] for p in "qkv"]))
    assert torch.equal(layer.mlp.gate_up.weight,
                       torch.cat([references[f"{prefix}.mlp.{p}_proj"] for p in ("gate", "up")]))

    ours = greedy_with_logits(model, PROMPT, 1)[0]
    assert float((ours - _hf_logits(dense_hf, tmp_path, references)).abs().max()) <= LOGIT_TOLERANCE
    with torch.no_grad():
        dense = dense_hf(torch.tensor([PROMPT])).logits[0]
    assert float((ours - dense).norm() / dense.norm()) < 0.1  # e4m3 rounding: 0.012 to 0.019 measured


def _replace(folder: Path, name: str, value: torch.Tensor) -> None:
    tensors = load_file(str(folder / "model.safetensors"))
    assert name in tensors
    tensors[name] = value
    save_file(tensors, str(folder / "model.safetensors"))


NAME = "model.layers.1.mlp.down_proj.weight_scale_inv"


@pytest.mark.parametrize(("value", "message"), [
    (torch.ones(3, 3), r"the block scale is \(3, 3\); blocks of 128x128 over \[576, 1536\] need \(5, 12\)"),
    (torch.full((5, 12), float("nan")), "the scale holds NaN or infinity"),
    (torch.full((5, 12), float("inf")), "the scale holds NaN or infinity"),
    (torch.zeros(5, 12), "the scale holds zero or a negative number"),
])
def test_bad_block_scales_are_refused_with_the_tensor_named(
    starter_two_layers: Path, tmp_path: Path, value: torch.Tensor, message: str
) -> None:
    write_fp8_copy(starter_two_layers, tmp_path, "block")
    _replace(tmp_path, NAME, value)
    with pytest.raises(CheckpointError, match=f"{NAME}: {message}"):
        load_model(tmp_path)


@pytest.mark.parametrize(("scale", "message"), [
    (torch.ones(3), r"the scale is \(3,\); a \[64, 256\] weight needs one per tensor"),
    (torch.ones(64, 2), r"the scale is \(64, 2\)"),
    (torch.tensor([0.0]), "zero or a negative number"),
    (torch.tensor(float("-inf")), "NaN or infinity"),
])
def test_bad_tensor_and_channel_scales_are_refused(scale: torch.Tensor, message: str) -> None:
    q, _, _ = fp8_quantize(torch.randn(64, 256), "channel")
    with pytest.raises(Fp8ScaleError, match=message):
        Fp8Weight.checked(q, scale, None)


def test_an_fp8_weight_without_its_scale_or_config_is_refused(starter_two_layers: Path, tmp_path: Path) -> None:
    write_fp8_copy(starter_two_layers, tmp_path, "channel")
    tensors = load_file(str(tmp_path / "model.safetensors"))
    del tensors["model.layers.0.self_attn.o_proj.weight_scale"]
    save_file(tensors, str(tmp_path / "model.safetensors"))
    with pytest.raises(CheckpointError, match="o_proj: FP8 weight without a scale"):
        load_model(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    del config["quantization_config"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="is FP8 but config.json names no FP8 quantization"):
        load_model(tmp_path)


@pytest.mark.parametrize(("quant", "message"), [
    ({"quant_method": "fp8", "fmt": "e5m2"}, "FP8 format 'e5m2' is not supported"),
    ({"quant_method": "fp8", "weight_block_size": [128]}, "weight_block_size \\[128\\] is not two positive"),
    ({"quant_method": "compressed-tensors", "format": "pack-quantized",
      "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int"}}}}, "with 4-bit int weights is not supported"),
])
def test_unsupported_fp8_configs_are_refused(quant: dict, message: str) -> None:
    raw = {"architectures": ["LlamaForCausalLM"], "vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
           "num_hidden_layers": 1, "num_attention_heads": 1, "quantization_config": quant}
    with pytest.raises(CheckpointError, match=message):
        ModelConfig.from_dict(raw)


def test_fused_scales_stay_exact() -> None:
    torch.manual_seed(0)
    parts = [Fp8Weight.checked(*fp8_quantize(torch.randn(n, 256), layout)[:2], None)
             for n, layout in ((128, "tensor"), (64, "channel"), (64, "tensor1"))]
    fused = Fp8Weight.concat(parts)
    assert fused.scale.shape == (256, 1) and fused.weight.dtype == FP8
    assert torch.equal(fused.dequantize(), torch.cat([p.dequantize() for p in parts]))
    blocks = [Fp8Weight.checked(*fp8_quantize(torch.randn(n, 256), "block")[:2], (128, 128)) for n in (128, 64)]
    assert torch.equal(Fp8Weight.concat(blocks[:1] * 2).dequantize(), torch.cat([blocks[0].dequantize()] * 2))
    with pytest.raises(ValueError, match="cannot be fused"):
        Fp8Weight.concat(blocks[::-1])  # 64 rows do not fill a block


def _fp8_cuda() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9)


@pytest.mark.gpu
@pytest.mark.skipif(not _fp8_cuda(), reason="needs a GPU of compute capability 8.9 or more")
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_fp8_layer_in_scaled_mm_matches_the_dequantized_weight(layout: str) -> None:
    torch.manual_seed(0)
    q, scale, reference = fp8_quantize(torch.randn(384, 1024) * 0.05, layout)
    weight = Fp8Weight.checked(q, scale, (128, 128) if layout == "block" else None)
    layer = Fp8Linear(weight, None, torch.device("cuda"))
    x = torch.randn(5, 1024, device="cuda", dtype=torch.bfloat16)
    expected = x.float() @ reference.cuda().t()
    got = layer(x).float()
    # The activations are rounded to e4m3 per row as well: a few per cent of the largest output.
    assert float((got - expected).abs().max()) <= 0.06 * float(expected.abs().max())
