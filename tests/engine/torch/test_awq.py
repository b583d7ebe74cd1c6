"""AWQ GEMM checkpoints: AWQ's packing order, exact dequantization, logits within quantization error.

The test quantizes a dense tiny model itself (round-to-nearest per group with zero points,
packed in AWQ's interleaved order), so the reference weights are its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from engine.torch.arch import load_model
from engine.torch.awq import AwqWeight, Int4Linear, pack_awq, tinygemm_scales_and_zeros, unpack_awq
from engine.torch.model_config import ModelConfig
from tests.engine.torch.reference import greedy_with_logits
from tests.fixtures.tiny_hf import awq_pack, awq_quantize, write_awq_copy, write_tiny_model


def test_awq_packing_order_of_one_word() -> None:
    # Columns 0..7 hold their own index; AWQ puts column 0, 2, 4, 6, 1, 3, 5, 7 in nibbles 0..7.
    values = torch.arange(8, dtype=torch.uint8).view(1, 8)
    assert awq_pack(values).item() == 0x75316420
    assert unpack_awq(torch.tensor([[0x75316420]], dtype=torch.int32)).tolist() == [list(range(8))]


def test_pack_and_unpack_round_trip_with_the_sign_bit() -> None:
    values = torch.randint(0, 16, (6, 32), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
    values[:, 7] = 15  # nibble 7 is the sign bit of the int32
    assert torch.equal(unpack_awq(awq_pack(values)), values)
    assert torch.equal(pack_awq(values), awq_pack(values))


@pytest.fixture(scope="module")
def dense(tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("dense")
    hf = write_tiny_model(directory, "llama", tokenizer=False, num_hidden_layers=1)
    return directory, hf


@pytest.mark.parametrize("group_size", [32, 64, 128])
def test_awq_checkpoint_dequantizes_exactly_and_tracks_the_dense_model(dense, tmp_path: Path, group_size: int) -> None:
    dense_dir, hf = dense
    references = write_awq_copy(dense_dir, tmp_path, group_size)
    config = ModelConfig.from_dir(tmp_path)
    assert config.awq is not None and config.awq.group_size == group_size
    model = load_model(tmp_path).model
    layer = model.layers[0]
    prefix = "model.layers.0"
    qkv = torch.cat([references[f"{prefix}.self_attn.{p}_proj"] for p in "qkv"])
    gate_up = torch.cat([references[f"{prefix}.mlp.{p}_proj"] for p in ("gate", "up")])
    assert torch.equal(layer.qkv.weight, qkv)
    assert torch.equal(layer.o.weight, references[f"{prefix}.self_attn.o_proj"])
    assert torch.equal(layer.mlp.gate_up.weight, gate_up)
    assert torch.equal(layer.mlp.down.weight, references[f"{prefix}.mlp.down_proj"])

    # Logits: those of transformers' model holding the reference weights, and close to the dense model's.
    state = {k: v.float() for k, v in load_file(str(tmp_path / "model.safetensors")).items() if k[-7:-6] != "q"}
    state.update({f"{k}.weight": v for k, v in references.items()})
    hf_quant = type(hf)(hf.config).eval()
    hf_quant.load_state_dict(state, strict=False)
    prompt = list(range(3, 67))
    ours = greedy_with_logits(model, prompt, 1)[0]
    with torch.no_grad():
        assert float((ours - hf_quant(torch.tensor([prompt])).logits[0]).abs().max()) <= 1e-3
        dense_logits = hf(torch.tensor([prompt])).logits[0]
    relative = float((ours - dense_logits).norm() / dense_logits.norm())
    assert relative < 0.35  # 4-bit RTN of random weights: 0.25 to 0.30 measured for groups 32 to 128


def test_mismatched_awq_shapes_are_refused(dense, tmp_path: Path) -> None:
    packed, _ = awq_quantize(torch.randn(64, 128), 32)
    with pytest.raises(ValueError, match="AWQ shapes do not agree"):
        AwqWeight.from_packed(packed["qweight"], packed["qzeros"], packed["scales"], 64)


@pytest.mark.parametrize("group_size", [32, 64, 128])
def test_tinygemm_zero_points_reproduce_awq_on_the_cpu_kernel(group_size: int) -> None:
    """The CUDA path's (scale, zero) conversion, checked through the CPU build of the same int4 matmul."""
    torch.manual_seed(0)
    packed, reference = awq_quantize(torch.randn(64, 256) * 0.05, group_size)
    weight = AwqWeight.from_packed(packed["qweight"], packed["qzeros"], packed["scales"], group_size)
    int4 = torch.ops.aten._convert_weight_to_int4pack_for_cpu(weight.q.to(torch.int32), 1)
    x = torch.randn(3, 256)
    y = torch.ops.aten._weight_int4pack_mm_for_cpu(x, int4, group_size, tinygemm_scales_and_zeros(weight))
    assert torch.allclose(y, x @ reference.t(), atol=1e-5)


CUDA = pytest.param(
    "cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
)


@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("group_size", [32, 64, 128])
def test_int4_layer_matches_the_dequantized_weight(device: str, group_size: int) -> None:
    """The layer AWQ weights run in on CUDA, and on the CPU when fp32 would not fit: bf16 activations."""
    torch.manual_seed(0)
    packed, reference = awq_quantize(torch.randn(256, 512) * 0.05, group_size)
    weight = AwqWeight.from_packed(packed["qweight"], packed["qzeros"], packed["scales"], group_size)
    layer = Int4Linear(weight, None, torch.device(device))
    x = torch.randn(5, 512, device=device)
    expected = x.to(torch.bfloat16).float() @ reference.to(device).t()
    got = layer(x)
    assert got.dtype == torch.float32 and got.shape == (5, 256)
    assert float((got - expected).abs().max()) <= 2e-2 * float(expected.abs().max())
    if device == "cpu":  # half a byte a weight, against four dequantized
        assert layer.packed.numel() * layer.packed.element_size() == 256 * 512 // 2


def test_awq_model_kept_4_bit_on_the_cpu_tracks_the_dequantized_one(dense, tmp_path: Path) -> None:
    dense_dir, _ = dense
    write_awq_copy(dense_dir, tmp_path, 32)
    exact = load_model(tmp_path).model
    int4 = load_model(tmp_path, "cpu", awq_int4=True).model
    assert isinstance(int4.layers[0].qkv, Int4Linear) and isinstance(int4.layers[0].mlp.down, Int4Linear)
    linear_bytes = sum(b.numel() * b.element_size() for m in int4.modules() if isinstance(m, Int4Linear)
                       for b in m.buffers())
    dense_bytes = sum(m.weight.numel() * 4 for layer in exact.layers for m in (layer.qkv, layer.o, layer.mlp.gate_up,
                                                                                layer.mlp.down))
    assert linear_bytes < dense_bytes / 6  # 4-bit values with bf16 scales and zeros per group of 32
    prompt = list(range(3, 67))
    ours, reference = greedy_with_logits(int4, prompt, 1)[0], greedy_with_logits(exact, prompt, 1)[0]
    # Only the bf16 rounding of the activations differs: far below the 4-bit quantization error itself.
    assert float((ours - reference).norm() / reference.norm()) < 0.02
