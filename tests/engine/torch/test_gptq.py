"""GPTQ checkpoints (AutoGPTQ v1 / GPTQModel v2 layouts): packing, g_idx, zero points, logits, refusals.

The starter model's first two layers (real weights) are quantized by tests/fixtures/tiny_quant.py in
the reference tools' layout; the loader must give back exactly the dequantized reference weights, and
logits within float rounding of transformers' model holding them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from engine.torch.arch import load_model
from engine.torch.awq import Int4Linear
from engine.torch.gptq import gptq_weight, unpack_cols, unpack_rows
from engine.torch.model_config import CheckpointError, ModelConfig
from engine.torch.quant_config import GptqConfig
from tests.engine.torch.reference import greedy_with_logits
from tests.fixtures.tiny_quant import gptq_quantize, pack_along_cols, pack_along_rows, write_gptq_copy

PROMPT = list(range(100, 164))
# transformers vs ours on the same dequantized weights: 0.0 measured (fp32 on both sides); headroom for BLAS.
LOGIT_TOLERANCE = 2e-3


def test_gptq_packs_rows_in_plain_order_and_v1_stores_zeros_minus_one() -> None:
    rows = torch.arange(8, dtype=torch.int64).view(8, 1)  # rows 0..7 of one column hold their index
    assert pack_along_rows(rows, 4).item() == 0x76543210 == pack_along_cols(rows.t(), 4).item()
    assert unpack_rows(torch.tensor([[0x76543210]], dtype=torch.int32), 4).view(-1).tolist() == list(range(8))
    assert unpack_cols(torch.tensor([[0x76543210]], dtype=torch.int32), 4).view(-1).tolist() == list(range(8))
    # Symmetric 4-bit: every zero point is 8, a v1 file holds 7 in each nibble.
    tensors, _ = gptq_quantize(torch.randn(8, 64), 4, 32, sym=True, desc_act=False, v1=True)
    assert tensors["qzeros"].unique().tolist() == [0x77777777]
    words = pack_along_rows(torch.full((8, 1), 15, dtype=torch.int64), 4)
    assert words.dtype == torch.int32 and words.item() == -1  # the sign bit, as the files store it


@pytest.fixture(scope="module")
def dense_hf(starter_two_layers: Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(starter_two_layers, dtype=torch.float32).eval()


def _hf_logits(hf_dense, folder: Path, references: dict[str, torch.Tensor]) -> torch.Tensor:
    """transformers' model holding the checkpoint's own dense tensors and the dequantized references."""
    state = {k: v.float() for k, v in load_file(str(folder / "model.safetensors")).items()
             if k.rsplit(".", 1)[-1] == "weight" and v.is_floating_point() and v.dtype != torch.float8_e4m3fn}
    state.update({f"{k}.weight": v for k, v in references.items()})
    model = type(hf_dense)(hf_dense.config).eval()
    model.load_state_dict(state, strict=False)
    with torch.no_grad():
        return model(torch.tensor([PROMPT])).logits[0]


CASES = [  # bits, group, sym, desc_act, v1
    (4, 128, True, False, True),
    (4, 128, False, True, True),
    (4, 64, True, True, False),
    (4, 32, False, False, False),
    (4, -1, True, False, True),
    (4, -1, False, True, True),
    (8, 128, True, True, True),
]


@pytest.mark.parametrize(("bits", "group", "sym", "desc_act", "v1"), CASES)
def test_gptq_checkpoint_dequantizes_exactly_and_tracks_the_dense_model(
    starter_two_layers: Path, dense_hf, tmp_path: Path, bits: int, group: int, sym: bool, desc_act: bool, v1: bool
) -> None:
    references = write_gptq_copy(starter_two_layers, tmp_path, bits, group, sym, desc_act, v1)
    config = ModelConfig.from_dir(tmp_path)
    assert config.quant == GptqConfig(bits, group, desc_act, sym, v1)
    model = load_model(tmp_path).model
    layer, prefix = model.layers[1], "model.layers.1"
    assert torch.equal(layer.qkv.weight, torch.cat([references[f"{prefix}.self_attn.{p}_proj"] for p in "qkv"]))
    assert torch.equal(layer.mlp.down.weight, references[f"{prefix}.mlp.down_proj"])

    ours = greedy_with_logits(model, PROMPT, 1)[0]
    assert float((ours - _hf_logits(dense_hf, tmp_path, references)).abs().max()) <= LOGIT_TOLERANCE
    with torch.no_grad():
        dense = dense_hf(torch.tensor([PROMPT])).logits[0]
    relative = float((ours - dense).norm() / dense.norm())
    assert relative < (0.02 if bits == 8 else 0.2)  # RTN of real weights: 0.04 to 0.10 at 4 bits measured (8-bit: 0.004)


def test_act_order_gptq_stays_4_bit_on_the_cpu_and_tracks_the_dequantized_model(
    starter_two_layers: Path, tmp_path: Path
) -> None:
    write_gptq_copy(starter_two_layers, tmp_path, 4, 64, sym=False, desc_act=True)
    exact = load_model(tmp_path).model
    int4 = load_model(tmp_path, "cpu", awq_int4=True).model
    qkv = int4.layers[0].qkv
    assert isinstance(qkv, Int4Linear) and qkv.perm is not None  # the act-order permutation, applied to x
    assert isinstance(int4.layers[0].mlp.down, Int4Linear)
    ours, reference = greedy_with_logits(int4, PROMPT, 1)[0], greedy_with_logits(exact, PROMPT, 1)[0]
    assert float((ours - reference).norm() / reference.norm()) < 0.02  # bf16 activations only


def _gptq_layer(**changes):
    torch.manual_seed(0)
    tensors, _ = gptq_quantize(torch.randn(64, 256), 4, 32, sym=False, desc_act=True)
    tensors.update(changes)
    return tensors


ACT_ORDER = GptqConfig(bits=4, group_size=32, desc_act=True, sym=False, zeros_minus_one=True)


def test_gptq_act_order_without_g_idx_is_refused() -> None:
    with pytest.raises(CheckpointError, match="desc_act .* no g_idx"):
        gptq_weight(_gptq_layer(g_idx=None), ACT_ORDER, 64, 256)


@pytest.mark.parametrize(("g_idx", "message"), [
    (torch.zeros(256, dtype=torch.int32), "does not put 32 input columns in each group"),
    (torch.full((256,), 9, dtype=torch.int32), "names group 9, but there are 8 groups"),
    (torch.zeros(255, dtype=torch.int32), r"g_idx is \(255,\)"),
])
def test_a_bad_g_idx_is_refused(g_idx: torch.Tensor, message: str) -> None:
    with pytest.raises(CheckpointError, match=message):
        gptq_weight(_gptq_layer(g_idx=g_idx), ACT_ORDER, 64, 256)


def test_gptq_tensors_of_the_wrong_shape_are_refused() -> None:
    bad = _gptq_layer()
    with pytest.raises(CheckpointError, match=r"GPTQ scales is \(4, 64\)"):
        gptq_weight({**bad, "scales": bad["scales"][:4]}, ACT_ORDER, 64, 256)
    with pytest.raises(CheckpointError, match="NaN or infinity"):
        gptq_weight({**bad, "scales": bad["scales"] * float("inf")}, ACT_ORDER, 64, 256)


@pytest.mark.parametrize(("changes", "message"), [
    ({"bits": 3}, "3-bit GPTQ is not supported (only 4-bit and 8-bit)"),
    ({"bits": 2}, "2-bit GPTQ is not supported (only 4-bit and 8-bit)"),
    ({"group_size": 16}, "GPTQ group size 16 is not supported"),
    ({"checkpoint_format": "marlin"}, "GPTQ checkpoint format 'marlin' is not supported"),
])
def test_unsupported_gptq_configs_are_refused_with_the_setting_named(
    starter_two_layers: Path, tmp_path: Path, changes: dict, message: str
) -> None:
    config = json.loads((starter_two_layers / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": 128, **changes}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ModelConfig.from_dir(tmp_path)


def test_a_gptq_folder_missing_g_idx_under_act_order_fails_to_load(starter_two_layers: Path, tmp_path: Path) -> None:
    write_gptq_copy(starter_two_layers, tmp_path, 4, 64, sym=True, desc_act=True)
    tensors = load_file(str(tmp_path / "model.safetensors"))
    del tensors["model.layers.0.self_attn.k_proj.g_idx"]
    save_file(tensors, str(tmp_path / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"model.layers.0.self_attn.k_proj: GPTQ desc_act .* no g_idx"):
        load_model(tmp_path)



@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize(("group", "desc_act"), [(128, False), (128, True), (-1, False), (32, True)])
def test_gptq_layer_in_the_cuda_int4_kernel_matches_the_dequantized_weight(group: int, desc_act: bool) -> None:
    torch.manual_seed(0)
    tensors, reference = gptq_quantize(torch.randn(512, 1024) * 0.05, 4, group, sym=False, desc_act=desc_act)
    config = GptqConfig(bits=4, group_size=group, desc_act=desc_act, sym=False, zeros_minus_one=True)
    layer = Int4Linear(gptq_weight(tensors, config, 512, 1024), None, torch.device("cuda"))
    x = torch.randn(7, 1024, device="cuda")
    expected = x.to(torch.bfloat16).float() @ reference.cuda().t()
    assert float((layer(x) - expected).abs().max()) <= 2e-2 * float(expected.abs().max())
